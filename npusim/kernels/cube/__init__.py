"""The cube pipeline as CANN's matmul kernels run it: the tiling (``tiling.py``: TCubeTiling and the
spread of output blocks over the AIC cores), the program of one output block with L1 and L0 double
buffering (``pipeline.py``), and a kernel of many blocks built from reused pieces (``kernel.py``).
PyPTO's matmul tile ops and the torch matmul ops (``kernels/matmul``, ``kernels/quant_matmul``,
``kernels/grouped_matmul``) are built from them (docs/calibration.md, "Compute and memory")."""
