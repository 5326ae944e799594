"""`torchvision`: torchvision's image classifiers by name, written on the public door alone (`orch.workload`'s
function adapter): `workload.py` (parameters, torch-free), `data.py` (the model from its builder, synthetic
learnable images or an ImageFolder, in ranks only). docs/workloads.md says how to run ResNet-50 at MLPerf's
size."""
