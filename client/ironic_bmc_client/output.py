# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Following a run's output: what of a newly read text is new.

While a run goes on, the runs API gives the last bytes of its output (the
report's ``output_tail``); once it has ended, all of the kept output.
A follower prints each text's part after its overlap with what it has
printed already.
"""

#: How much of the printed text is matched against a new one.
WINDOW = 8192
_REPLACEMENT = '\ufffd'


def unseen(printed, text):
    """The part of ``text`` after its longest overlap with the end of
    ``printed`` (all of ``text`` when they do not overlap).

    ``text`` is either a later tail of the same output (it begins
    inside what was printed, or after it when more than a tail's worth
    came in between) or the whole output (it holds what was printed).
    """
    if not printed:
        return text
    # Not the remains of a split character the first tail began with.
    window = printed[-WINDOW:].lstrip(_REPLACEMENT)
    if not window:
        return text
    # The whole output, or a tail longer than what was printed.
    at = text.rfind(window)
    if at >= 0:
        return text[at + len(window):]
    # A tail that begins inside what was printed; its first character
    # may be the remains of a character the tail's cut split.
    start = len(text) - len(text.lstrip(_REPLACEMENT))
    body = text[start:]
    for k in range(min(len(body), len(window)), 0, -1):
        if window.endswith(body[:k]):
            return body[k:]
    return text
