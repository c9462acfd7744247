"""sglbench: benchmark SGLang server configurations on multi-GPU hosts, driven by Ansible."""

__version__ = "0.1.0"
