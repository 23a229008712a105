"""Element-wise device kernels of the torch device's own ops: ``cast`` (dtype conversion,
``aclnnCast``) and ``fill`` (``aclnnInplaceFillScalar``), split over the vector cores."""
