fn main() {
    std::process::exit(warden::cli::run());
}
