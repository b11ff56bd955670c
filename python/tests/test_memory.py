"""Memory kept between calls: present after a backward, freed by
release_cached_memory() (also through gridsampler.torch), bounded by
set_cached_memory_limit(), results unchanged."""

import threading

import numpy as np
import pytest

import gridsampler


def _problem(seed=0, shape=(2, 16, 64, 64, 32, 32)):
    n, c, hi, wi, ho, wo = shape
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, c, hi, wi)).astype(np.float32)
    g = rng.uniform(-1.1, 1.1, (n, ho, wo, 2)).astype(np.float32)
    go = rng.uniform(-1, 1, (n, c, ho, wo)).astype(np.float32)
    return go, x, g


def test_backward_caches_then_release_frees():
    go, x, g = _problem()
    gridsampler.release_cached_memory()
    assert gridsampler.cached_memory_bytes() == 0
    dx, dgrid = gridsampler.grid_sample_backward(go, x, g)
    cached = gridsampler.cached_memory_bytes()
    assert 0 < cached <= gridsampler.cached_memory_limit()
    gridsampler.release_cached_memory()
    assert gridsampler.cached_memory_bytes() == 0
    dx2, dgrid2 = gridsampler.grid_sample_backward(go, x, g)
    assert dx2.tobytes() == dx.tobytes()
    assert dgrid2.tobytes() == dgrid.tobytes()
    assert gridsampler.cached_memory_bytes() == cached
    gridsampler.release_cached_memory()
    assert gridsampler.cached_memory_bytes() == 0


def test_release_frees_other_threads_buffers():
    go, x, g = _problem(1)
    gridsampler.release_cached_memory()
    ran, release_done = threading.Event(), threading.Event()
    results = []

    def worker():
        results.append(gridsampler.grid_sample_backward(go, x, g))
        ran.set()
        release_done.wait(60)

    t = threading.Thread(target=worker)
    t.start()
    assert ran.wait(60)
    assert gridsampler.cached_memory_bytes() > 0  # the live worker's buffer
    gridsampler.release_cached_memory()
    assert gridsampler.cached_memory_bytes() == 0
    release_done.set()
    t.join()
    dx, dgrid = gridsampler.grid_sample_backward(go, x, g)
    assert dx.tobytes() == results[0][0].tobytes()
    assert dgrid.tobytes() == results[0][1].tobytes()
    gridsampler.release_cached_memory()


def test_torch_release(torch, gt):
    go, x, g = (torch.from_numpy(a) for a in _problem(2))
    x.requires_grad_(True)
    g.requires_grad_(True)
    gt.release_cached_memory()
    assert gt.cached_memory_bytes() == 0
    out = gt.grid_sample(x, g, align_corners=False)
    out.backward(go)
    assert 0 < gt.cached_memory_bytes() <= gt.cached_memory_limit()
    dx, dgrid = x.grad.clone(), g.grad.clone()
    gt.release_cached_memory()
    assert gt.cached_memory_bytes() == 0
    x.grad, g.grad = None, None
    gt.grid_sample(x, g, align_corners=False).backward(go)
    assert torch.equal(x.grad, dx) and torch.equal(g.grad, dgrid)
    gt.release_cached_memory()


def test_limit_bounds_what_is_kept():
    go, x, g = _problem(3)
    default = gridsampler.cached_memory_limit()
    assert default == 128 << 20
    gridsampler.release_cached_memory()
    dx, dgrid = gridsampler.grid_sample_backward(go, x, g)
    kept = gridsampler.cached_memory_bytes()
    assert kept > 0
    try:
        gridsampler.set_cached_memory_limit(kept - 1)  # frees the idle buffer above it at once
        assert gridsampler.cached_memory_limit() == kept - 1
        assert gridsampler.cached_memory_bytes() == 0
        dx2, dgrid2 = gridsampler.grid_sample_backward(go, x, g)
        assert gridsampler.cached_memory_bytes() == 0  # freed on return
        assert dx2.tobytes() == dx.tobytes() and dgrid2.tobytes() == dgrid.tobytes()
        gridsampler.set_cached_memory_limit(0)
        gridsampler.grid_sample_backward(go, x, g)
        assert gridsampler.cached_memory_bytes() == 0
        gridsampler.set_cached_memory_limit(2**70)  # more than any size: no bound
        assert gridsampler.cached_memory_limit() == 2**64 - 1
    finally:
        gridsampler.set_cached_memory_limit(default)
    gridsampler.grid_sample_backward(go, x, g)
    assert gridsampler.cached_memory_bytes() == kept
    gridsampler.release_cached_memory()


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True, None])
def test_limit_rejects_what_is_not_a_size(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        gridsampler.set_cached_memory_limit(bad)
    assert gridsampler.cached_memory_limit() == 128 << 20


def test_torch_exports_the_limit(gt):
    assert gt.set_cached_memory_limit is gridsampler.set_cached_memory_limit
    assert gt.cached_memory_limit() == gridsampler.cached_memory_limit()
