"""The torchvision family (`workloads/vision/`): its parameters refused at plan time with the reason, a
torch-free import, every torchvision classification builder known by name, the synthetic images deterministic
and learnable, an ImageFolder read, and a model built and stepped through the function adapter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.vision.workload import ARCHS


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as a 1-thread rank has: two OpenMP threads on a shared 2-vCPU machine can run
    many times slower than one, and these tests time nothing."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _params(**values):
    params, problems = parse_params(find_workload("torchvision").workload, {"precision": "fp32", **values})
    assert problems == [], problems
    return params


def _problems(**values):
    return [str(p) for p in parse_params(find_workload("torchvision").workload, values)[1]]


def test_it_is_an_entry_point_of_orch_and_its_import_is_torch_free():
    code = ("import sys; from orchestrator.io.workload_finder import find_workload; "
            "w = find_workload('torchvision').workload; print(w.name, w.metrics, w.samples_per_epoch(w.params_type()), "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "torchvision ('accuracy',) 2048 []"


def test_the_known_architectures_are_torchvisions_classification_builders():
    import torchvision

    assert sorted(ARCHS) == sorted(torchvision.models.list_models(module=torchvision.models))


@pytest.mark.parametrize("values, expected", [
    ({"arch": "resnet5"}, "workload.params: arch('resnet5') is not a torchvision classification model; it may be "
                          "one of: resnet101, resnet152, resnet18, resnet34, resnet50, resnext101_32x8d"),
    ({"arch": "vit_b_16", "image_size": 40}, "image_size(40) must be a multiple of vit_b_16's patch (16)"),
    ({"arch": "inception_v3", "image_size": 64}, "image_size(64) < 75: the smallest inception_v3 takes"),
    ({"data_path": "data/imagenet"}, "data_path('data/imagenet') must be absolute: ranks may run in another folder"),
    ({"classes": 1}, "workload.params.classes: must be >= 2, got 1"),
])
def test_bad_parameters_are_refused_with_the_reason(values, expected):
    assert any(expected in p for p in _problems(**values)), _problems(**values)


def test_the_defaults_are_the_small_setting_and_a_data_folder_leaves_the_epoch_to_the_probe():
    w = find_workload("torchvision").workload
    assert (_params().arch, _params().image_size) == ("resnet18", 32)
    assert w.samples_per_epoch(_params(train_samples=100)) == 100
    assert w.samples_per_epoch(_params(data_path="/data/imagenet")) is None


def test_synthetic_images_are_deterministic_per_data_seed_and_the_splits_differ():
    import torch

    from workloads.vision.data import SyntheticImages

    p = _params(image_size=32, classes=3, train_samples=8, eval_samples=8)
    a, b = SyntheticImages(p, "train"), SyntheticImages(p, "train")
    assert len(a) == 8 and a[5][0].shape == (3, 32, 32) and 0 <= a[5][1] < 3
    assert torch.equal(a[5][0], b[5][0]) and a[5][1] == b[5][1]
    assert not torch.equal(a[5][0], SyntheticImages(p, "eval")[5][0])
    assert not torch.equal(a[5][0], SyntheticImages(_params(image_size=32, classes=3, data_seed=7), "train")[5][0])
    with pytest.raises(IndexError):
        a[8]


def test_the_class_patterns_separate_the_classes_above_the_noise():
    """The task is learnable: the nearest class pattern over all circular shifts (what a convolutional network
    with global pooling can learn) names most images' class."""
    import torch

    from workloads.vision.data import SyntheticImages

    data = SyntheticImages(_params(image_size=32, classes=4, eval_samples=40), "eval")
    right = 0
    for image, label in (data[i] for i in range(len(data))):
        spectrum = torch.fft.fft2(image).abs()   # invariant to circular shifts
        distances = [(torch.fft.fft2(pattern).abs() - spectrum).norm() for pattern in data.patterns]
        right += int(torch.stack(distances).argmin()) == label
    assert right / len(data) > 0.8


def _trainer(local_batch=8, **values):
    w = find_workload("torchvision").workload
    return w.build(_params(**values), RankContext(rank=0, world_size=1, local_batch=local_batch, seed=0, threads=1))


@pytest.mark.parametrize("arch, image_size", [("resnet18", 32), ("vit_b_32", 32), ("googlenet", 32)])
def test_an_architecture_builds_and_steps_through_the_adapter(arch, image_size):
    import torch

    trainer = _trainer(arch=arch, image_size=image_size, classes=3, train_samples=16, eval_samples=8,
                       memory_format="channels_last")
    assert trainer.steps_per_epoch() == 2 and trainer.samples_per_epoch() == 16
    for batch in trainer.batches(0):
        trainer.optimizer.zero_grad()
        loss = trainer.module(*batch)
        assert loss.dim() == 0 and torch.isfinite(loss)
        loss.backward()
        trainer.optimizer.step()
    assert 0.0 <= trainer.evaluate()["accuracy"] <= 1.0


def test_an_image_folder_is_read_with_its_classes_and_a_wrong_count_is_named(tmp_path):
    from PIL import Image

    from orch.workload import WorkloadError

    for split in ("train", "val"):
        for c, colour in enumerate(("red", "blue")):
            folder = tmp_path / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(4):
                Image.new("RGB", (40, 40), colour).save(folder / f"{i}.png")
    trainer = _trainer(local_batch=4, data_path=str(tmp_path), classes=2)
    assert trainer.samples_per_epoch() == 8
    images, labels = next(trainer.batches(0))
    assert images.shape == (4, 3, 32, 32) and set(labels.tolist()) <= {0, 1}
    with pytest.raises(WorkloadError, match="has 2 class folders but classes is 3: set classes: 2"):
        _trainer(data_path=str(tmp_path), classes=3)
    with pytest.raises(WorkloadError, match="no train/ folder"):
        _trainer(data_path=str(tmp_path / "train"), classes=2)


@pytest.mark.slow
def test_resnet18_learns_the_synthetic_images_well_above_chance():
    """A few epochs of the small setting (4 classes: chance 0.25), evaluated on held-out images."""
    trainer = _trainer(local_batch=16, classes=4, noise=0.5, train_samples=256, eval_samples=128)
    for epoch in range(3):
        for batch in trainer.batches(epoch):
            trainer.optimizer.zero_grad()
            trainer.module(*batch).backward()
            trainer.optimizer.step()
    assert trainer.evaluate()["accuracy"] > 0.6
