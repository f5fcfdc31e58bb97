//! System calls without libc, for code that runs where libc must not be touched: the
//! janitor's first stage shares the supervisor's memory (`CLONE_VM`) and its thread pointer,
//! so a libc wrapper's `errno` write would land in the supervisor's. Returns the kernel's
//! value: `-errno` on failure.

/// A raw system call with up to six arguments.
///
/// # Safety
/// The caller passes arguments that are valid for system call `nr` (pointers to live memory
/// of the right size).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall6(nr: i64, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86_64 system call convention: number in rax, arguments in rdi, rsi,
    // rdx, r10, r8, r9; the kernel clobbers rcx and r11; no stack use.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    ret
}

/// A raw system call with up to six arguments.
///
/// # Safety
/// The caller passes arguments that are valid for system call `nr`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall6(nr: i64, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the Linux arm64 system call convention: number in x8, arguments and result in
    // x0..x5; no stack use.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack)
        );
    }
    ret
}
