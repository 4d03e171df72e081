"""experiments.benchmark: what a result records about the machine."""

from experiments.benchmark import device_info


def test_device_info_records_the_xla_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_command_buffer=")
    assert device_info()["xla_flags"] == "--xla_gpu_enable_command_buffer="
    monkeypatch.delenv("XLA_FLAGS")
    assert device_info()["xla_flags"] == ""
