#!/usr/bin/env python3
"""Record misaki's espeak-ng phonemes of input.json (misaki_test.go).

misaki.en.G2P, which kokoro's KPipeline uses for English, reads a word from
its lexicon and calls misaki.espeak.EspeakFallback for a word the lexicon
lacks. This script runs EspeakFallback itself, unchanged, on top of
phonemizer's EspeakBackend and this machine's libespeak-ng (the library
Hearth loads), for en-us and en-gb:

  words:    each word Hearth sends espeak-ng, given alone, as G2P gives a
            token to the fallback;
  sentence: the whole normalised sentence given at once (phonemizer splits
            it at punctuation, espeak-ng reads each clause).

Each result then gets the one step G2P.__call__ applies after the fallback
(for version != '2.0', which is kokoro's): ɾ → T and ʔ → t.

The lexicon + spaCy path cannot run here: spaCy and en_core_web_sm are not
installable without a package index. input.json holds the sentences after
Hearth's normalisation (numbers, currency, abbreviations written out), the
stand-in for misaki's lexicon and num2words, which never let digits reach
espeak-ng either.

Sources (not part of Hearth; kept out of git under .oracle/, which
.git/info/exclude ignores):

  .oracle/misaki/misaki/espeak.py     hexgrad/misaki misaki/espeak.py @ d0123ee8
                                      (misaki 0.9.4), unchanged
  .oracle/misaki/phonemizer/          bootphon/phonemizer 3.x, the espeak
                                      backend only: separator, logger, utils,
                                      punctuation @ 17f1b399, backend/base.py,
                                      backend/espeak/{base,espeak,api,wrapper,
                                      voice,language_switch,words_mismatch}.py;
                                      base.py and espeak.py patched to pass
                                      separator and strip to Punctuation.restore
                                      as phonemizer >= 3.2 (misaki's
                                      phonemizer-fork 3.3) does
  .oracle/misaki/stubs/               espeakng_loader (returns the system
                                      library), dlinfo and joblib (imported,
                                      unused on this path)

To rerun (Debian with espeak-ng / libespeak-ng1 installed):

  go test ./vocoder/phonemes -run TestMisakiInput -misaki.input   # if sentences.txt or
                                                         # the normaliser changed
  PYTHONPATH=.oracle/misaki:.oracle/misaki/stubs \\
  PHONEMIZER_ESPEAK_LIBRARY=/usr/lib/x86_64-linux-gnu/libespeak-ng.so.1 \\
      python3 vocoder/phonemes/testdata/misaki/make_misaki_fixture.py

It writes misaki.json next to this file.
"""
import hashlib
import json
import os
import subprocess

import misaki.espeak
import phonemizer.backend.espeak.espeak as phonemizer_espeak
from misaki.espeak import EspeakFallback
from phonemizer.backend.espeak.wrapper import EspeakWrapper

here = os.path.dirname(os.path.abspath(__file__))


class Token:
    """The one field of misaki's MToken that EspeakFallback reads."""

    def __init__(self, text):
        self.text = text


def after_g2p(ps):
    # misaki/en.py, G2P.__call__: tk.phonemes.replace('ɾ', 'T').replace('ʔ', 't')
    return None if ps is None else ps.replace('ɾ', 'T').replace('ʔ', 't')


def sha256(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    with open(os.path.join(here, 'input.json'), encoding='utf-8') as f:
        sentences = json.load(f)
    wrapper = EspeakWrapper()
    out = {
        'versions': {
            'espeak-ng': '.'.join(map(str, wrapper.version)),
            'libespeak-ng': str(wrapper.library_path),
            'espeak-ng --version': subprocess.run(
                ['espeak-ng', '--version'], capture_output=True, text=True).stdout.strip(),
            'misaki': 'hexgrad/misaki misaki/espeak.py @ d0123ee895d6ece0d4f983c7af2ff580a76cea89',
            'misaki/espeak.py sha256': sha256(misaki.espeak.__file__),
            'phonemizer espeak.py sha256': sha256(phonemizer_espeak.__file__),
        },
        'langs': {},
    }
    for lang, british in (('en-us', False), ('en-gb', True)):
        fallback = EspeakFallback(british=british)
        rows = []
        for s in sentences:
            words = {w: after_g2p(fallback(Token(w))[0]) for w in s['words']}
            rows.append({
                'text': s['text'],
                'words': words,
                'sentence': after_g2p(fallback(Token(s['normalized']))[0]),
            })
        out['langs'][lang] = rows
    with open(os.path.join(here, 'misaki.json'), 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write('\n')
    print(f'wrote misaki.json: {len(sentences)} sentences, en-us and en-gb')


if __name__ == '__main__':
    main()
