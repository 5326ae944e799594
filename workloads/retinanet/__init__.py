"""`retinanet`: torchvision's RetinaNet (MLPerf's single-stage detector: ResNeXt50-32x4d FPN, 800x800 images,
264 classes) on deterministic synthetic shapes or a COCO-format dataset, with CPU optimizations as switches.

`workload.py` is torch-free (parameters, memory formula, epoch size); `model.py`, `data.py`, `evaluate.py`
and `trainer.py` are the torch side, imported inside rank processes only.
"""
