import torch


def pytest_report_header(config):
    from helpers import DEVICE, LARGE
    return f"flashtriton tests: device={DEVICE}, large shapes={'on' if LARGE else 'off'}, torch {torch.__version__}"
