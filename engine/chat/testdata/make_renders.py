#!/usr/bin/env python3
"""Expected chat-template renders for engine/chat's tests.

Renders every template in shared/testdata/templates (templates.jsonl and the
.jinja/.jinja2 files) for a few conversations with Jinja2 configured exactly as
transformers' apply_chat_template configures it (transformers
utils/chat_template_utils.py: ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; a tojson filter that does not escape HTML or
non-ASCII; raise_exception and strftime_now globals; messages, tools,
documents, add_generation_prompt and the special tokens as variables).
strftime_now reads a fixed clock so the renders are reproducible.

It also renders engine/chat/builtin/*.jinja (the fallback templates) for
the same conversations, and WHITESPACE: small templates that exercise
Jinja2's whitespace control, which Hearth resolves itself before handing a
template to its Jinja engine.

Usage: python3 make_renders.py SHARED_TEMPLATES_DIR > renders.json
Needs only Jinja2 (3.1.6 made the committed file).
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 12, 2, 10, 30, 0)

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]

CONVERSATIONS = {
    "basic": dict(messages=[
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is \"2+2\"? Answer in 日本語 🙂"},
        {"role": "assistant", "content": "4 — 四です。"},
        {"role": "user", "content": "And 3+3?\nThanks."},
    ], add_generation_prompt=True),
    "nosystem": dict(messages=[
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the GPU cross the road?"},
    ], add_generation_prompt=False),
    "tools": dict(messages=[
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
        }]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    ], tools=TOOLS, add_generation_prompt=True),
}


WHITESPACE = [
    "{% if x %}{{ y }}\n{% endif %}|",
    "a\n  {{ y }}{% if x %}b{% endif %}|",
    "User: {{ y }}{%- if x -%} c{% endif %}|",
    "A\n\n{% if x %}{%- if x %}B{% endif %}{% endif %}|",
    "{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}|",
    "  {% if x %}\n    indented\n  {% endif %}\n",
    "{# comment #}\nafter\n  {# indented comment #}\nend",
    "a {%+ if x %}b{% endif +%}\nc",
    "{% raw %}\n  {{ not rendered }} {%- x -%}\n{% endraw %}\nafter",
    "{%- raw -%}  keep  {%- endraw %}|",
    "  {% raw %}x{% endraw %}\n|",
    "line1\r\nline2\r{% if x %}\r\nyes{% endif %}\n",
    "{{ {'a': {'b': 1}}['a']['b'] }}|{{ '%}' }}|{{ \"}}\" }}|{{ [1, [2]][1][0] }}",
    "x  \u3000{{- y -}}\u00a0 z",
    "{% if x -%}\n\n  spaced  \n\n{%- endif %}",
    "{% set s = 'it\\'s' %}{{ s }} and \\ backslash 'quote' \"dq\"",
    "trailing newlines\n\n",
    "{%- for m in items -%}\n{{ m }},\n{%- endfor %}",
    "{{ y }}   {% if x %}z{% endif %}",
    "{% macro f(a) -%}\n  [{{ a }}]\n{%- endmacro %}{{ f(1) }}{{ f(2) }}",
    "{% if x %}\n\t\t{% if x %}\n\t\tdeep\n\t\t{% endif %}\n{% endif %}",
    "{#- a -#}  \n  {#- b #}\n{{ y }}",
    "{{ y }}\n    {%- if x %} joined{% endif %}",
]
WHITESPACE_VARS = {"x": True, "y": "Y", "items": [1, 2, 3]}

# The functions transformers adds: tojson (json.dumps) and strftime_now.
FUNCS = [
    "{{ obj | tojson }}",
    "{{ obj | tojson(indent=2) }}",
    "{{ obj | tojson(indent=4, sort_keys=true) }}",
    "{{ obj | tojson(separators=[',', ':']) }}",
    "{{ obj | tojson(ensure_ascii=true) }}",
    "{{ [] | tojson }}{{ {} | tojson(indent=2) }}{{ 'x' | tojson }}{{ 3 | tojson }}",
    "{{ obj.a[0] | tojson }}|{{ obj['m'] | tojson(indent=1) }}|{{ (obj.z + 1) | tojson }}|{{ [1, 'x'] | tojson }}"
    "|{{ {'k': obj.z} | tojson }}|{{ obj.a | first | tojson }}|{{ obj.a[1:3] | tojson | safe }}"
    "|{{ 'a' ~ obj.z | tojson ~ 'b' }}|{{ obj.z|tojson }}|{{ not obj.z | tojson }}",
    "{% set j = obj.m | tojson %}{{ j }}|{% for k, v in obj.m | items %}{{ k | tojson }}={{ v | tojson }};{% endfor %}",
    "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A, %B %-d, %Y %H:%M:%S %p %j %y %I %a %m %e') }}",
]
FUNCS_VARS = {"obj": {"z": 1, "a": [1.5, 2.0, 1e-05, 1e16, 0.0001, 123456789012345678, -0.5, True, None,
                                     "\u00e9\"\n\t\u2028<&>\U0001F600\x01\\"],
                      "m": {"k": {}, "l": []}}}


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def templates(root):
    seen = {}
    with open(os.path.join(root, "templates.jsonl"), encoding="utf-8") as f:
        for line in f:
            for name, src in json.loads(line).items():
                seen[name] = seen.get(name, 0) + 1
                yield {"name": f"{name}#{seen[name]}", "jsonl_line": sum(seen.values())}, src
    for fn in sorted(os.listdir(root)):
        if fn.endswith((".jinja", ".jinja2")):
            with open(os.path.join(root, fn), encoding="utf-8") as f:
                yield {"name": fn, "file": fn}, f.read()


def builtins():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "builtin")
    for fn in sorted(os.listdir(root)):
        if fn.endswith(".jinja"):
            with open(os.path.join(root, fn), encoding="utf-8") as f:
                yield {"name": "builtin:" + fn[:-len(".jinja")], "builtin": fn[:-len(".jinja")]}, f.read()


def main():
    env = environment()
    out = []
    for ident, src in list(templates(sys.argv[1])) + list(builtins()):
        tmpl = env.from_string(src)
        for conv, kw in CONVERSATIONS.items():
            if conv == "tools" and "tool" not in src:
                continue
            case = dict(ident, conversation=conv)
            try:
                case["render"] = tmpl.render(**SPECIAL, tools=kw.get("tools"), documents=None,
                                             messages=kw["messages"], add_generation_prompt=kw["add_generation_prompt"])
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            out.append(case)
    ws = [{"template": t, "render": env.from_string(t).render(**WHITESPACE_VARS)} for t in WHITESPACE]
    funcs = [{"template": t, "render": env.from_string(t).render(**FUNCS_VARS)} for t in FUNCS]
    json.dump({"special": SPECIAL, "now": NOW.isoformat(), "conversations": CONVERSATIONS,
               "whitespace_vars": WHITESPACE_VARS, "whitespace": ws,
               "funcs_vars": FUNCS_VARS, "funcs": funcs, "cases": out},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
