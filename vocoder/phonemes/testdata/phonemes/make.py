#!/usr/bin/env python3
"""Regenerate the expected phonemes of sentences.txt (TestPhonemizeReference).

For each sentence and each of en-us and en-gb, this does what misaki's
EspeakFallback does, independently of the Go code under test:

  1. espeak-ng phonemizes each clause (the words between punctuation marks)
     through libespeak-ng's espeak_TextToPhonemes, IPA with '^' ties, as
     phonemizer's EspeakBackend(with_stress=True, tie='^') calls it;
  2. each output word is mapped with EspeakFallback's table and rules
     (hexgrad/misaki, misaki/espeak.py at commit d0123ee8), then the flap
     ɾ → T of kokoro's KPipeline.en_tokenize;
  3. the clauses are joined with their punctuation.

The result is written to en-us.tsv and en-gb.tsv (sentence TAB phonemes).
espeak-ng may join two words into one output word (in the → ɪnðə); the Go
phonemizer splits those, so the test compares with spaces removed.

misaki's own espeak code (EspeakFallback) is compared in ../misaki
(make_misaki_fixture.py, README.md); misaki's lexicon + spaCy path needs
spaCy and its English model, which no machine here can install.

Usage: python3 make.py   (needs libespeak-ng1 / espeak-ng installed)
"""
import ctypes
import ctypes.util
import os
import re

lib = ctypes.cdll.LoadLibrary(ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1")
lib.espeak_ng_InitializePath(None)
ctx = ctypes.c_void_p()
assert lib.espeak_ng_Initialize(ctypes.byref(ctx)) == 0
assert lib.espeak_ng_InitializeOutput(1, 0, None) == 0
lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]

E2M = sorted({
    'ʔˌn\u0329': 'tn', 'ʔn\u0329': 'tn', 'ʔn': 'tn', 'ʔ': 't',
    'a^ɪ': 'I', 'a^ʊ': 'W',
    'd^ʒ': 'ʤ',
    'e^ɪ': 'A', 'e': 'A',
    't^ʃ': 'ʧ',
    'ɔ^ɪ': 'Y',
    'ə^l': 'ᵊl',
    'ʲo': 'jo', 'ʲə': 'jə', 'ʲ': '',
    'ɚ': 'əɹ',
    'r': 'ɹ',
    'x': 'k', 'ç': 'k',
    'ɐ': 'ə',
    'ɬ': 'l',
    '\u0303': '',
}.items(), key=lambda kv: -len(kv[0]))


def to_misaki(ps, british):
    for old, new in E2M:
        ps = ps.replace(old, new)
    ps = re.sub(r'(\S)\u0329', r'ᵊ\1', ps).replace(chr(809), '')
    if british:
        ps = ps.replace('e^ə', 'ɛː').replace('iə', 'ɪə').replace('ə^ʊ', 'Q')
    else:
        ps = ps.replace('o^ʊ', 'O').replace('ɜːɹ', 'ɜɹ').replace('ɜː', 'ɜɹ').replace('ɪə', 'iə').replace('ː', '')
    ps = ps.replace('o', 'ɔ').replace('^', '')
    return ps.replace('ɾ', 'T')


def espeak(text):
    buf = ctypes.create_string_buffer(text.encode())
    ptr = ctypes.c_void_p(ctypes.addressof(buf))
    out = []
    while ptr.value:
        out.append(lib.espeak_TextToPhonemes(ctypes.byref(ptr), 1, 0x02 | 0x80 | (ord('^') << 8)).decode().strip())
    return ' '.join(o for o in out if o)


here = os.path.dirname(os.path.abspath(__file__))
sentences = [s for s in open(os.path.join(here, 'sentences.txt')).read().splitlines() if s.strip()]
for lang, voice in (('en-us', b'en-us'), ('en-gb', b'en')):  # en-gb is the file gmw/en
    assert lib.espeak_ng_SetVoiceByName(voice) == 0
    with open(os.path.join(here, lang + '.tsv'), 'w') as f:
        for s in sentences:
            parts = re.findall(r"[A-Za-z'-]+(?:\s+[A-Za-z'-]+)*|[,.;:!?]", s)
            ps = ''
            for p in parts:
                if p in ',.;:!?':
                    ps += p
                else:
                    ps += (' ' if ps else '') + ' '.join(to_misaki(w, lang == 'en-gb') for w in espeak(p).split())
            f.write(f'{s}\t{ps}\n')
print('wrote en-us.tsv and en-gb.tsv')
