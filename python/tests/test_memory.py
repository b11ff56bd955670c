"""Memory kept between calls: present after a backward, freed by
release_cached_memory() (also through gridsampler.torch), results unchanged."""

import threading

import numpy as np

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
    assert 0 < cached <= 32 << 20
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
    assert 0 < gt.cached_memory_bytes() <= 32 << 20
    dx, dgrid = x.grad.clone(), g.grad.clone()
    gt.release_cached_memory()
    assert gt.cached_memory_bytes() == 0
    x.grad, g.grad = None, None
    gt.grid_sample(x, g, align_corners=False).backward(go)
    assert torch.equal(x.grad, dx) and torch.equal(g.grad, dgrid)
    gt.release_cached_memory()
