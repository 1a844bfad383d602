//! `TCP_NODELAY` for the HTTP listener. Dropshot 0.18 binds the listening
//! socket itself and offers no option for it; without `TCP_NODELAY` a
//! streamed response's small writes (SSE events) wait for the client's
//! delayed ACK (about 40 ms on Linux) whenever an earlier write is not yet
//! acknowledged. On Linux an accepted socket inherits the option from its
//! listener, so it is set on the listener, found among this process's
//! file descriptors by its local address.

use std::net::SocketAddr;

#[cfg(target_os = "linux")]
pub fn set_on_listener(addr: SocketAddr) -> Result<(), String> {
    use std::os::fd::BorrowedFd;
    let entries = std::fs::read_dir("/proc/self/fd").map_err(|e| e.to_string())?;
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // The descriptor may be closed meanwhile; socket2 calls on a stale
        // number fail harmlessly (EBADF/ENOTSOCK).
        // SAFETY: borrowed only for the duration of these calls, never closed.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&borrowed);
        let Ok(local) = sock.local_addr() else {
            continue;
        };
        if local.as_socket() != Some(addr) || !sock.is_listener().unwrap_or(false) {
            continue;
        }
        return sock.set_tcp_nodelay(true).map_err(|e| e.to_string());
    }
    Err(format!("no listening socket on {addr}"))
}

#[cfg(not(target_os = "linux"))]
pub fn set_on_listener(_addr: SocketAddr) -> Result<(), String> {
    Err("only on Linux".into())
}
