//! The warden's socket: a `SOCK_SEQPACKET` pair (one message per packet, descriptors
//! passed beside it), closed on exec at both ends.

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A connected pair, both ends closed on exec.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?)
}

/// Sends `packet` with `fds` beside it. With `wait` false, a full socket is `EAGAIN`.
pub fn send(sock: RawFd, packet: &[u8], fds: &[RawFd], wait: bool) -> nix::Result<()> {
    let iov = [IoSlice::new(packet)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    let mut flags = MsgFlags::MSG_NOSIGNAL;
    if !wait {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    sendmsg::<()>(sock, &iov, cmsgs, flags, None).map(|_| ())
}

/// One packet into `buf`: its length (0 when the other end is closed) and the descriptors
/// that came with it (closed on exec). A packet larger than `buf` is `EMSGSIZE`.
pub fn recv(sock: RawFd, buf: &mut [u8], wait: bool) -> nix::Result<(usize, Vec<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [IoSliceMut::new(buf)];
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if !wait {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let got = recvmsg::<()>(sock, &mut iov, Some(&mut space), flags)?;
    let mut fds = Vec::new();
    // Descriptors are owned as soon as they are here, so none leaks on an early return.
    if let Ok(cmsgs) = got.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: descriptors the kernel just installed in this process for us.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
    }
    if got
        .flags
        .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC)
    {
        return Err(nix::errno::Errno::EMSGSIZE);
    }
    Ok((got.bytes, fds))
}
