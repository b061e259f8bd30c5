"""Scorecards: an interviewer's feedback on one interview, read under the no-peeking rule (`peeking`)."""
