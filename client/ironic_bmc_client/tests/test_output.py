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

"""Following output: each new text's part after what was printed."""

from ironic_bmc_client import output

OUT = ''.join('line %03d\n' % i for i in range(600))


def test_first_text_is_printed_whole():
    assert output.unseen('', OUT[-100:]) == OUT[-100:]


def test_a_later_tail_prints_only_what_came():
    # The output was shorter than a tail: the tail holds all of it.
    assert output.unseen(OUT[:3000], OUT[:3500]) == OUT[3000:3500]
    printed = OUT[:5000]
    assert output.unseen(printed, OUT[5200 - 4096:5200]) == OUT[5000:5200]


def test_no_new_output_prints_nothing():
    printed = OUT[:5000]
    assert output.unseen(printed, OUT[5000 - 4096:5000]) == ''


def test_the_full_output_prints_the_rest():
    printed = OUT[1000:5000]    # began following mid-run
    assert output.unseen(printed, OUT) == OUT[5000:]


def test_a_gap_longer_than_a_tail_prints_the_whole_tail():
    printed = OUT[:1000]
    assert output.unseen(printed, OUT[4000:5000]) == OUT[4000:5000]


def test_a_tail_that_begins_with_a_split_character():
    printed = OUT[:3000]
    tail = '\ufffd' + OUT[2500:3300]
    assert output.unseen(printed, tail) == OUT[3000:3300]
    # ... and the full output after a first tail that began so.
    assert output.unseen('\ufffd' + OUT[10:3000], OUT) == OUT[3000:]
