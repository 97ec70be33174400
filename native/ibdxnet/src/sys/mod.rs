//! Operating system and concurrency helpers.

pub mod affinity;
pub mod counter;
pub mod doorbell;
pub mod parking;
pub mod queue;
pub mod region;
pub mod write_watch;
