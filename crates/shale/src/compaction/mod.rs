//! Leveled compaction: the pure picker and the job that runs a task.
