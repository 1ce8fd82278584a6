"""farm.jobs.tensor_intrin: inspect.stack's answer as TVM's parser reads it, without its scans."""

from __future__ import annotations

import inspect

from farm.jobs.tensor_intrin import fast_stack


def _both() -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
    return inspect.stack(), fast_stack()  # one line: both see the same caller line


class TestFastStack:
    def test_gives_the_frames_lines_and_source_line_that_inspect_stack_gives(self) -> None:
        """TVM reads each frame, its code and the one line of code_context: all equal."""
        slow, fast = _both()
        assert len(fast) == len(slow)
        for mine, theirs in zip(fast, slow, strict=True):
            assert mine.frame is theirs.frame
            assert (mine.filename, mine.lineno, mine.function) == (
                theirs.filename, theirs.lineno, theirs.function)
            assert mine.code_context == theirs.code_context
            assert mine.index == theirs.index

    def test_starts_at_its_caller(self) -> None:
        assert fast_stack()[0].function == "test_starts_at_its_caller"
        assert fast_stack(0)[0].code_context is None
