//! msgrc (paper §7.2): the messaging engine over RC queue pairs with one
//! send thread, one receive thread, a shared receive queue and shared
//! completion queues.
//!
//! Modules, lowest first (each uses only those above it in this list):
//! `shared` (over the structs of [`crate::abi`]), `recv_pool`, `imm`, `timers`, `stats`, `stats_print`, `handler`, `config`;
//! then the threads `send` and `recv`; then `engine`, which starts them.

pub mod agent;
pub mod config;
pub mod engine;
pub mod handler;
pub mod imm;
pub mod recv;
pub(crate) mod recv_agent;
pub use recv_agent::CallerPoll;
pub mod recv_pool;
pub mod send;
pub(crate) mod send_agent;
pub(crate) mod send_owner;
pub mod shared;
pub mod stats;
pub mod stats_print;
pub mod timers;

/// The shared structs the engine's handler reads and writes (defined, with
/// their constants, in [`crate::abi`]).
pub use crate::abi::{
    CompletedWork, CompletedWorkList, IncomingEntry, IncomingRingHeader, NextWorkPackage, PrevWorkResults, NO_BUFFER,
    NWP_VALID,
};
pub use config::EngineConfig;
pub use engine::{Engine, EngineError};
pub use handler::{EngineHandler, SendWakeup, ThreadRole};
pub use shared::{CompletedList, IncomingRing};
pub use stats::EngineStats;
