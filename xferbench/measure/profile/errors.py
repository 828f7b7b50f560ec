"""The one error of profiling: what went wrong, said so that the reader knows what to do."""


class ProfileError(RuntimeError):
    pass
