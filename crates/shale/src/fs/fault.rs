//! A fault-injecting file system: simulated power loss and failing operations.
