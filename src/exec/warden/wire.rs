//! What the engine and its warden say to each other: one message per packet of a
//! `SOCK_SEQPACKET` socket pair, a tag byte and then fixed-width numbers and
//! length-prefixed bytes. Both ends are the same build (the warden proves it with
//! [`Msg::Hello`] first), so nothing here is versioned.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// What the warden says first; anything else means a warden of another build.
pub const PROTOCOL: &str = "baton-warden 2";

/// The largest message either side sends. A step whose command line and environment do
/// not fit is started the old way, under a guard of its own.
pub const MAX: usize = 160 * 1024;

/// A program to start, with its standard input, output and error passed beside the
/// message (in that order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The engine's number for it, echoed in every answer.
    pub id: u64,
    /// Between SIGTERM and SIGKILL when the engine is gone.
    pub grace_ms: u64,
    /// The program's path, already looked up on the step's `PATH`.
    pub program: OsString,
    /// Its arguments, `argv[0]` first.
    pub argv: Vec<OsString>,
    /// Its whole environment, `NAME=value`.
    pub env: Vec<OsString>,
    /// The folder it starts in.
    pub cwd: OsString,
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    Signalled(i32),
}

/// One message, either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Warden → engine, once, at its start.
    Hello(String),
    /// Engine → warden.
    Start(Start),
    /// Warden → engine: started, as the leader of its own process group; `start` is its
    /// start time as `/proc` gives it (0 when it could not be read).
    Started { id: u64, pid: u32, start: u64 },
    /// Warden → engine: could not be started (`errno`, and what the warden knows).
    Failed { id: u64, errno: i32, why: String },
    /// Warden → engine: the program ended; `clean` when no process of its group, and no
    /// orphan handed to the warden, is left.
    Ended {
        id: u64,
        status: Status,
        clean: bool,
    },
}

impl Msg {
    /// The message as one packet.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Msg::Hello(p) => {
                out.push(b'H');
                bytes(&mut out, p.as_bytes());
            }
            Msg::Start(s) => {
                out.push(b'S');
                out.extend_from_slice(&s.id.to_le_bytes());
                out.extend_from_slice(&s.grace_ms.to_le_bytes());
                bytes(&mut out, s.program.as_bytes());
                bytes(&mut out, s.cwd.as_bytes());
                for list in [&s.argv, &s.env] {
                    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                    for item in list {
                        bytes(&mut out, item.as_bytes());
                    }
                }
            }
            Msg::Started { id, pid, start } => {
                out.push(b'P');
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&pid.to_le_bytes());
                out.extend_from_slice(&start.to_le_bytes());
            }
            Msg::Failed { id, errno, why } => {
                out.push(b'F');
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&errno.to_le_bytes());
                bytes(&mut out, why.as_bytes());
            }
            Msg::Ended { id, status, clean } => {
                out.push(b'E');
                out.extend_from_slice(&id.to_le_bytes());
                let (kind, n) = match status {
                    Status::Exited(c) => (0u8, *c),
                    Status::Signalled(s) => (1u8, *s),
                };
                out.push(kind);
                out.extend_from_slice(&n.to_le_bytes());
                out.push(u8::from(*clean));
            }
        }
        out
    }

    /// The message in `packet`; None for anything malformed.
    pub fn decode(packet: &[u8]) -> Option<Msg> {
        let mut r = Reader(packet);
        let msg = match r.u8()? {
            b'H' => Msg::Hello(String::from_utf8(r.bytes()?.to_vec()).ok()?),
            b'S' => {
                let id = r.u64()?;
                let grace_ms = r.u64()?;
                let program = r.os()?;
                let cwd = r.os()?;
                let argv = r.list()?;
                let env = r.list()?;
                Msg::Start(Start {
                    id,
                    grace_ms,
                    program,
                    argv,
                    env,
                    cwd,
                })
            }
            b'P' => Msg::Started {
                id: r.u64()?,
                pid: r.u32()?,
                start: r.u64()?,
            },
            b'F' => Msg::Failed {
                id: r.u64()?,
                errno: r.u32()? as i32,
                why: String::from_utf8_lossy(r.bytes()?).into_owned(),
            },
            b'E' => {
                let id = r.u64()?;
                let kind = r.u8()?;
                let n = r.u32()? as i32;
                let clean = r.u8()? == 1;
                let status = match kind {
                    0 => Status::Exited(n),
                    1 => Status::Signalled(n),
                    _ => return None,
                };
                Msg::Ended { id, status, clean }
            }
            _ => return None,
        };
        r.0.is_empty().then_some(msg)
    }
}

/// Numbers an encoded [`Msg::Start`] packet (its id follows the tag byte), so that a
/// request is encoded once, before the number it goes out with is known.
pub fn number_start(packet: &mut [u8], id: u64) {
    if packet.first() == Some(&b'S') && packet.len() >= 9 {
        packet[1..9].copy_from_slice(&id.to_le_bytes());
    }
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn os(&mut self) -> Option<OsString> {
        Some(OsString::from_vec(self.bytes()?.to_vec()))
    }
    fn list(&mut self) -> Option<Vec<OsString>> {
        let n = self.u32()? as usize;
        // Each item takes at least its 4-byte length: a count past that is a lie.
        if n > self.0.len() / 4 {
            return None;
        }
        (0..n).map(|_| self.os()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_comes_back_as_it_went() {
        let msgs = [
            Msg::Hello(PROTOCOL.into()),
            Msg::Start(Start {
                id: 7,
                grace_ms: 2000,
                program: "/bin/sh".into(),
                argv: vec!["sh".into(), "-c".into(), "echo 'hi'\n".into()],
                env: vec!["A=1".into(), OsString::from_vec(b"B=\xff".to_vec())],
                cwd: "/tmp/w t".into(),
            }),
            Msg::Started {
                id: 7,
                pid: 4242,
                start: 123_456,
            },
            Msg::Failed {
                id: 8,
                errno: 2,
                why: "no such file".into(),
            },
            Msg::Ended {
                id: 7,
                status: Status::Signalled(9),
                clean: true,
            },
            Msg::Ended {
                id: 9,
                status: Status::Exited(-1),
                clean: false,
            },
        ];
        for m in msgs {
            assert_eq!(Msg::decode(&m.encode()), Some(m));
        }
    }

    #[test]
    fn a_start_numbered_after_it_was_encoded_reads_with_its_number() {
        let start = Start {
            id: 0,
            grace_ms: 5,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            env: vec![],
            cwd: "/".into(),
        };
        let mut packet = Msg::Start(start.clone()).encode();
        number_start(&mut packet, 41);
        assert_eq!(
            Msg::decode(&packet),
            Some(Msg::Start(Start { id: 41, ..start }))
        );
        // Any other message is left as it is.
        let ended = Msg::Ended {
            id: 3,
            status: Status::Exited(0),
            clean: true,
        };
        let mut other = ended.encode();
        number_start(&mut other, 41);
        assert_eq!(Msg::decode(&other), Some(ended));
    }

    #[test]
    fn a_cut_or_padded_packet_is_refused_not_misread() {
        let m = Msg::Started {
            id: 1,
            pid: 2,
            start: 3,
        }
        .encode();
        assert_eq!(Msg::decode(&m[..m.len() - 1]), None);
        let mut long = m.clone();
        long.push(0);
        assert_eq!(Msg::decode(&long), None);
        assert_eq!(Msg::decode(b""), None);
        assert_eq!(Msg::decode(b"Z"), None);
        // A list that claims more items than bytes left.
        let mut lie = vec![b'S'];
        lie.extend_from_slice(&[0; 16]);
        lie.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        lie.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Msg::decode(&lie), None);
    }
}
