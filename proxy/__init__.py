"""Session links: HAProxy routes to notebooks, TensorBoard and apps."""
