"""Run-time services: devices, the compilation cache and its watch, the stopwatch, TensorBoard, run
directories, reproducible kernels, spawned worker processes."""
