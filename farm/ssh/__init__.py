"""SSH to Linux boards: argv lists in, bytes and exit codes out (see :mod:`farm.ssh.client`)."""

from farm.ssh.client import SshClient, SshError, SshResult, SshTimeout, SshUnreachable

__all__ = ["SshClient", "SshError", "SshResult", "SshTimeout", "SshUnreachable"]
