//! Tunnels between two TCP sockets with `splice(2)` through a pipe per direction: the bytes
//! move inside the kernel (socket → pipe → socket) and never through warden's memory, which is
//! what keeps a tunnel close to direct throughput.
//!
//! `splice(2)` is Linux-only; elsewhere (the macOS backend) [`tunnel`] copies through a buffer.
//!
//! [`tunnel_metered`] reports every chunk as it is written (a call per splice, not per byte),
//! so byte counters move during a long tunnel and keep what moved before an error.

#[cfg(target_os = "linux")]
use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};
use std::io;
use std::os::fd::AsRawFd;
#[cfg(target_os = "linux")]
use std::os::fd::{AsFd, OwnedFd};
#[cfg(target_os = "linux")]
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Pipe capacity asked for (the kernel may grant less: /proc/sys/fs/pipe-max-size).
#[cfg(target_os = "linux")]
const PIPE_SIZE: i32 = 1 << 20;

/// Called with `(a→b, b→a)` bytes each time a chunk was written (one of them 0).
pub type Meter<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Moves bytes both ways until both directions have ended; returns (a→b, b→a) byte counts.
/// Each direction's EOF is passed on as a write shutdown of the other socket.
pub async fn tunnel(a: &TcpStream, b: &TcpStream) -> io::Result<(u64, u64)> {
    tunnel_metered(a, b, &|_, _| {}).await
}

/// [`tunnel`], reporting each chunk to `meter` as it is written.
#[cfg(target_os = "linux")]
pub async fn tunnel_metered(
    a: &TcpStream,
    b: &TcpStream,
    meter: Meter<'_>,
) -> io::Result<(u64, u64)> {
    let (up, down) = (|n| meter(n, 0), |n| meter(0, n));
    let (ab, ba) = tokio::join!(one_way(a, b, &up), one_way(b, a, &down));
    Ok((ab?, ba?))
}

#[cfg(target_os = "linux")]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // A larger pipe means fewer wake-ups per megabyte; failure only costs speed.
    let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    Ok((r, w))
}

#[cfg(target_os = "linux")]
async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    count: &(dyn Fn(u64) + Sync),
) -> io::Result<u64> {
    let (pipe_r, pipe_w) = pipe()?;
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    let mut total = 0u64;
    let mut in_pipe = 0usize;
    loop {
        if in_pipe == 0 {
            let n = from
                .async_io(Interest::READABLE, || {
                    splice(
                        from.as_fd(),
                        None,
                        pipe_w.as_fd(),
                        None,
                        PIPE_SIZE as usize,
                        flags,
                    )
                    .map_err(io::Error::from)
                })
                .await;
            match n {
                Ok(0) => {
                    let _ = nix::sys::socket::shutdown(
                        to.as_raw_fd(),
                        nix::sys::socket::Shutdown::Write,
                    );
                    return Ok(total);
                }
                Ok(n) => in_pipe = n,
                Err(e) => {
                    abort(from, to);
                    return Err(e);
                }
            }
        }
        let n = to
            .async_io(Interest::WRITABLE, || {
                splice(pipe_r.as_fd(), None, to.as_fd(), None, in_pipe, flags)
                    .map_err(io::Error::from)
            })
            .await;
        match n {
            Ok(n) => {
                in_pipe -= n;
                total += n as u64;
                count(n as u64);
            }
            Err(e) => {
                abort(from, to);
                return Err(e);
            }
        }
    }
}

/// A failed direction ends the whole tunnel: the other direction must not wait forever.
fn abort(a: &TcpStream, b: &TcpStream) {
    for s in [a, b] {
        let _ = nix::sys::socket::shutdown(s.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    }
}

/// [`tunnel_metered`] without `splice(2)`: each direction copies through a 64 KiB buffer.
#[cfg(not(target_os = "linux"))]
pub async fn tunnel_metered(
    a: &TcpStream,
    b: &TcpStream,
    meter: Meter<'_>,
) -> io::Result<(u64, u64)> {
    let (up, down) = (|n| meter(n, 0), |n| meter(0, n));
    let (ab, ba) = tokio::join!(copy_one_way(a, b, &up), copy_one_way(b, a, &down));
    Ok((ab?, ba?))
}

#[cfg(not(target_os = "linux"))]
async fn copy_one_way(
    from: &TcpStream,
    to: &TcpStream,
    count: &(dyn Fn(u64) + Sync),
) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    let result: io::Result<()> = async {
        loop {
            from.readable().await?;
            let n = match from.try_read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            let mut done = 0;
            while done < n {
                to.writable().await?;
                match to.try_write(&buf[done..n]) {
                    Ok(k) => done += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
            total += n as u64;
            count(n as u64);
        }
    }
    .await;
    match result {
        Ok(()) => {
            let _ = nix::sys::socket::shutdown(to.as_raw_fd(), nix::sys::socket::Shutdown::Write);
            Ok(total)
        }
        Err(e) => {
            abort(from, to);
            Err(e)
        }
    }
}
