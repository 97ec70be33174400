//! `pin_threads` (the paper's `pinSendRecvThreads`): the CPU each engine
//! thread is restricted to, e.g. `send=0,recv=1`; empty pins none.

use std::fmt;

use crate::msgrc::handler::ThreadRole;
use crate::sys::affinity::MAX_CPU;

/// The threads in the order of the text form.
const ORDER: [ThreadRole; 3] = [ThreadRole::Send, ThreadRole::Recv, ThreadRole::Job];

/// The CPU of each pinned engine thread; a thread without one runs where the
/// scheduler puts it (among the CPUs the starting thread may use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadPins {
    /// CPU of the send thread.
    pub send: Option<usize>,
    /// CPU of the receive thread.
    pub recv: Option<usize>,
    /// CPU of the job (connection manager) thread.
    pub job: Option<usize>,
}

/// Why a `pin_threads` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinsError {
    /// An entry without `=`.
    #[error("'{0}' is not thread=cpu (e.g. send=0,recv=1)")]
    NotThreadCpu(String),
    /// A thread name other than `send`, `recv` or `job`.
    #[error("unknown thread '{0}' (expected send, recv or job)")]
    UnknownThread(String),
    /// A CPU that is not a number a CPU set holds.
    #[error("{thread}: '{cpu}' is not a CPU number in [0, {}]", MAX_CPU)]
    BadCpu {
        /// The thread.
        thread: &'static str,
        /// The text given as its CPU.
        cpu: String,
    },
    /// The same thread twice.
    #[error("{0} is pinned twice")]
    Twice(&'static str),
}

impl ThreadPins {
    /// Parses `thread=cpu` entries separated by commas (threads `send`,
    /// `recv`, `job`, each at most once); empty pins none.
    pub fn parse(text: &str) -> Result<ThreadPins, PinsError> {
        let mut pins = ThreadPins::default();
        if text.trim().is_empty() {
            return Ok(pins);
        }
        for entry in text.split(',') {
            let (name, cpu) = entry.split_once('=').ok_or_else(|| PinsError::NotThreadCpu(entry.trim().into()))?;
            let role = ORDER
                .into_iter()
                .find(|r| r.name() == name.trim())
                .ok_or_else(|| PinsError::UnknownThread(name.trim().into()))?;
            let cpu = cpu
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&c| c <= MAX_CPU)
                .ok_or_else(|| PinsError::BadCpu { thread: role.name(), cpu: cpu.trim().into() })?;
            let slot = pins.slot(role);
            if slot.replace(cpu).is_some() {
                return Err(PinsError::Twice(role.name()));
            }
        }
        Ok(pins)
    }

    /// The CPU of `role`'s thread, if pinned (the shared thread of
    /// `engine_threads=shared` takes the send thread's).
    pub fn cpu(&self, role: ThreadRole) -> Option<usize> {
        match role {
            ThreadRole::Send | ThreadRole::Shared => self.send,
            ThreadRole::Recv => self.recv,
            ThreadRole::Job => self.job,
        }
    }

    fn slot(&mut self, role: ThreadRole) -> &mut Option<usize> {
        match role {
            ThreadRole::Send | ThreadRole::Shared => &mut self.send,
            ThreadRole::Recv => &mut self.recv,
            ThreadRole::Job => &mut self.job,
        }
    }

    /// The pinned threads and their CPUs, in the order of the text form.
    pub fn iter(&self) -> impl Iterator<Item = (ThreadRole, usize)> + '_ {
        ORDER.into_iter().filter_map(|r| Some((r, self.cpu(r)?)))
    }
}

/// The text form: `send=0,recv=1` (empty if none is pinned).
impl fmt::Display for ThreadPins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self.iter().map(|(r, cpu)| format!("{}={cpu}", r.name())).collect();
        f.write_str(&entries.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_values_parse_and_round_trip() {
        assert_eq!(ThreadPins::parse("").unwrap(), ThreadPins::default());
        assert_eq!(ThreadPins::parse("  ").unwrap().to_string(), "");
        let p = ThreadPins::parse(" recv = 1 , send=0").unwrap();
        assert_eq!(p, ThreadPins { send: Some(0), recv: Some(1), job: None });
        assert_eq!(p.to_string(), "send=0,recv=1");
        let p = ThreadPins::parse("job=3,send=2,recv=2").unwrap();
        assert_eq!(p.to_string(), "send=2,recv=2,job=3", "two threads may share a CPU");
        assert_eq!(ThreadPins::parse(&p.to_string()).unwrap(), p);
        assert_eq!(ThreadPins::parse(&format!("send={MAX_CPU}")).unwrap().send, Some(MAX_CPU));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let err = |t: &str| ThreadPins::parse(t).unwrap_err().to_string();
        assert_eq!(err("0,1"), "'0' is not thread=cpu (e.g. send=0,recv=1)");
        assert_eq!(err("send=0,"), "'' is not thread=cpu (e.g. send=0,recv=1)");
        assert_eq!(err("sender=0"), "unknown thread 'sender' (expected send, recv or job)");
        assert_eq!(err("recv=x"), format!("recv: 'x' is not a CPU number in [0, {MAX_CPU}]"));
        assert_eq!(err("recv=-1"), format!("recv: '-1' is not a CPU number in [0, {MAX_CPU}]"));
        assert_eq!(
            err(&format!("job={}", MAX_CPU + 1)),
            format!("job: '{}' is not a CPU number in [0, {MAX_CPU}]", MAX_CPU + 1)
        );
        assert_eq!(ThreadPins::parse("send=0,send=1"), Err(PinsError::Twice("send")));
    }
}
