//! Leveled compaction: the pure picker, the retention rule, and the job that runs a task.

pub(crate) mod job;
pub(crate) mod picker;
pub(crate) mod retention;
pub(crate) mod separation;
