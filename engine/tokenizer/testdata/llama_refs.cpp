// llama_refs tokenizes texts with llama.cpp's own tokenizer, for
// make_gemma4_refs.py: the reference Gemma 4 tokenizations of
// refs-gemma4.json come from here.
//
// Usage: llama_refs MODEL.gguf TEXTS.json OUT.json
// TEXTS.json is a list of {"hex": "..."} (the text's bytes, so that invalid
// UTF-8 can be given). OUT.json has, for each text, the ids of llama_tokenize
// with add_special on and parse_special on ("ids") and off ("ids_plain"),
// and the bytes llama_token_to_piece writes for "ids" with special on and
// off, in hex; and the vocabulary's BOS, EOS, EOT, add_bos, end-of-generation
// tokens and token attributes after loading.
#include "llama.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using json = nlohmann::json;

static std::string unhex(const std::string & h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) {
        out.push_back((char) std::stoi(h.substr(i, 2), nullptr, 16));
    }
    return out;
}

static std::string hex(const std::string & s) {
    static const char * digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 15]);
    }
    return out;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXTS.json OUT.json\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    auto tokenize = [&](const std::string & text, bool parse_special) {
        int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, parse_special);
        std::vector<llama_token> toks(n > 0 ? n : 0);
        if (n > 0) {
            llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), n, true, parse_special);
        }
        return toks;
    };
    auto piece = [&](llama_token t, bool special) {
        char buf[512];
        int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, special);
        return std::string(buf, n > 0 ? n : 0);
    };

    std::ifstream in_file(argv[2]);
    json in = json::parse(in_file);
    json out;
    out["cases"] = json::array();
    for (const auto & c : in) {
        const std::string text = unhex(c["hex"].get<std::string>());
        auto ids = tokenize(text, true);
        auto plain = tokenize(text, false);
        std::string with_special, without;
        for (auto t : ids) {
            with_special += piece(t, true);
            without += piece(t, false);
        }
        out["cases"].push_back({
            {"hex", c["hex"]},
            {"ids", ids},
            {"ids_plain", plain},
            {"pieces_special_hex", hex(with_special)},
            {"pieces_hex", hex(without)},
        });
    }
    out["bos"] = llama_vocab_bos(vocab);
    out["eos"] = llama_vocab_eos(vocab);
    out["eot"] = llama_vocab_eot(vocab);
    out["add_bos"] = llama_vocab_get_add_bos(vocab);
    json eog = json::array();
    json attrs = json::array();
    for (llama_token t = 0; t < llama_vocab_n_tokens(vocab); t++) {
        if (llama_vocab_is_eog(vocab, t)) {
            eog.push_back(t);
        }
        attrs.push_back((int) llama_vocab_get_attr(vocab, t));
    }
    out["eog"] = eog;
    out["attrs"] = attrs;

    std::ofstream(argv[3]) << out.dump(1) << "\n";
    llama_model_free(model);
    return 0;
}
