"""What workloads import: device tensors, sessions, and the torch_npu / pypto facades."""
