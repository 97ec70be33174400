//! msgrc (paper §7.2): the messaging engine over RC queue pairs with one
//! send thread, one receive thread, a shared receive queue and shared
//! completion queues.

pub mod config;
pub mod engine;
pub mod recv;
pub mod recv_pool;
pub mod send;
pub mod shared;

/// The shared structs the engine's handler reads and writes (defined, with
/// their constants, in [`crate::abi`]).
pub use crate::abi::{
    CompletedWork, CompletedWorkList, IncomingEntry, IncomingRingHeader, NextWorkPackage, PrevWorkResults, NO_BUFFER,
    NWP_VALID,
};
pub use config::EngineConfig;
pub use engine::{Engine, EngineError, EngineHandler, EngineStats, ThreadRole};
pub use shared::{CompletedList, IncomingRing};
