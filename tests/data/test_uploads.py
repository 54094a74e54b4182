"""rpfast._uploads.upload: host data to a device without waiting, other moves as torch makes them."""
import pytest
import torch

from rpfast._uploads import upload
from tests.helpers.device_reads import BlockingUploads

pytestmark = pytest.mark.backend_neutral


def test_upload_moves_and_converts_as_to_does():
    t = torch.arange(6).reshape(2, 3)
    assert upload(t, "cpu") is t
    assert upload(t, None, torch.float64).dtype == torch.float64
    moved = upload(t, "meta", torch.float32)
    assert moved.device.type == "meta" and moved.dtype == torch.float32 and moved.shape == t.shape
    assert upload(moved, "meta") is moved


def test_upload_to_a_device_never_blocks_but_a_plain_move_does():
    t = torch.arange(6)
    with BlockingUploads() as watch:
        upload(t, "meta")
    assert watch.uploads == []
    with BlockingUploads() as watch:
        t.to("meta")
        torch.empty(6, device="meta")[t]  # a host index beside device data: torch moves it, and waits
    assert len(watch.uploads) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_upload_to_a_gpu_is_pinned_and_asynchronous():  # pragma: no cover - GPU only
    t = torch.arange(1000)
    torch.cuda.set_sync_debug_mode("error")
    try:
        on_gpu = upload(t, "cuda", torch.float32)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(on_gpu.cpu(), t.float())
