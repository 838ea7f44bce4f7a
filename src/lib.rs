//! ibscope library glue shared by the binary and tests
