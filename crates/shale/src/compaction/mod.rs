//! Leveled compaction: the pure picker, the retention rule, and the job that runs a task.

pub(crate) mod retention;
