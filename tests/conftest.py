import pytest
import torch


def pytest_report_header(config):
    from helpers import DEVICE, LARGE
    return (f"flashtriton tests: device={DEVICE}, large shapes={'on' if LARGE else 'off'}, "
            f"torch {torch.__version__}")


@pytest.fixture(autouse=True)
def poison_outputs(monkeypatch):
    """Every buffer the kernels allocate starts as NaN (integers: -1), so an element that no
    program writes fails the comparison."""
    import flashtriton.kernels.bwd as bwd
    import flashtriton.kernels.decode as decode
    import flashtriton.kernels.fwd as fwd

    def nan_empty(*shape, dtype=None, device=None, **kw):
        t = torch.empty(*shape, dtype=dtype, device=device, **kw)
        return t.fill_(float("nan") if t.is_floating_point() else -1)

    monkeypatch.setattr(fwd, "_empty", nan_empty)
    monkeypatch.setattr(bwd, "_empty", nan_empty)
    monkeypatch.setattr(decode, "_empty", nan_empty)
    try:
        import flashtriton.kernels.bwd_gluon as bwd_gluon
        import flashtriton.kernels.fwd_gluon as fwd_gluon
    except ImportError:  # a Triton without Gluon
        return
    monkeypatch.setattr(fwd_gluon, "_empty", nan_empty)
    monkeypatch.setattr(bwd_gluon, "_empty", nan_empty)
