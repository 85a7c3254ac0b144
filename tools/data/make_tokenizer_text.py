#!/usr/bin/env python3
"""Writes a varied multilingual text for tokenizer parity tests and encoding-speed figures.

It mixes prose in many scripts (English with contractions in every case, German, French,
Russian, Greek, Chinese, Japanese, Korean, Arabic, Hebrew, Hindi, Thai, Vietnamese), emoji
(skin tones, ZWJ families, flags), decomposed accents, code (Python, C++, JSON, HTML, shell),
numbers (long digit runs, decimals, dates, Arabic-Indic and full-width digits), URLs, runs
of spaces, tabs and newlines, CRLF line ends, and chat-template markers such as
<|endoftext|> and <|im_start|>. Those are the places where pre-tokenizer regexes and byte-pair
merges differ between implementations.

It avoids the few code points whose whitespace class differs between regex engines (U+0085,
U+180E, U+FEFF: Rust's and Oniguruma's \\s, PCRE2's \\s and JavaScript's \\s disagree on them),
so that every reference implementation tokenizes the same text the same way.

The output is a pure function of --seed and --size (Python's random.Random is stable across
versions for the calls used here):

    python3 tools/data/make_tokenizer_text.py --size 120000 > text.txt

For BERT's WordPiece tokenizers, which use no regex, two more outputs:

    --bert-cases        the text, then lines of the cases where BertNormalizer and
                        BertPreTokenizer are easy to get wrong: [CLS]/[SEP]/[MASK] in the
                        text, accents, the CJK ranges' edges, Unicode quotes and dashes, control
                        and format characters (NUL, DEL, U+0085, U+FEFF, U+FFFD, private use),
                        combining marks whose category changed after Unicode 8.0, letters that
                        only recent Unicode versions case-map, words over 100 characters
    --code-point-sweep  instead of the text, "x" + C + "x" for every code point C of planes 0-3
                        and a sample of planes 14-16 (surrogates excepted), space-separated: a
                        character's class (dropped, white space, punctuation, CJK, mark) shows
                        in how the three split
"""

import argparse
import random
import sys

PROSE = [
    "The quick brown fox jumps over the lazy dog. It's what they'd expected, isn't it?",
    "I'M SURE THEY'LL COME BACK; WE'VE WAITED, AND YOU'RE RIGHT: IT'S LATE. SHE'D KNOW.",
    "Don't panic! We're fine, they've said, and I'll check what's left in O'Reilly's shop.",
    "Rock 'n' roll in the '90s wasn't what it used to be; y'all know that's true.",
    "Machine learning models can't read raw text: they read ids, and tokenizers make them.",
    "Größenwahn über der Straße: Fußgängerübergänge sind schön. Äpfel, Öl und Übermut!",
    "Donaudampfschifffahrtsgesellschaftskapitänsmützenabzeichen ist ein langes Wort.",
    "L'été dernier, nous sommes allés à Paris ; c'était « formidable » ! Où est l'hôtel ?",
    "Œuvre, cœur, naïve, Noël, garçon, façade — qu'en pensez-vous, aujourd'hui ?",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.",
    "ВСЕ ЛЮДИ РОЖДАЮТСЯ СВОБОДНЫМИ и равными в своём достоинстве и правах.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε! Ελληνικά: άέήίόύώ ΐΰ ΆΈΉ.",
    "我能吞下玻璃而不伤身体。机器学习是人工智能的一个分支，它使计算机能够从数据中学习。",
    "北京市朝阳区建国路88号，电话：010-12345678。今天天气很好，我们去公园散步吧！",
    "いろはにほへと ちりぬるを。私はガラスを食べられます。それは私を傷つけません。",
    "カタカナとひらがな、漢字を混ぜた文章です。東京タワーは３３３メートルです。",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 안녕하세요, 세계!",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم ١٢٣٤٥٦٧٨٩٠.",
    "אני יכול לאכול זכוכית וזה לא מזיק לי. שלום עולם!",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती। नमस्ते दुनिया।",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ สวัสดีชาวโลก",
    "Tôi có thể ăn thủy tinh mà không hại gì. Xin chào thế giới!",
    "Decomposed accents: cafe\u0301, n\u0303, A\u030angstro\u0308m, e\u0300 la\u0300.",
    "Un cafe\u0301 au lait, s'il vous pla\u00eet, or a caf\u00e9 au lait (precomposed): same after NFC.",
    "Typographic quotes: \u201cHello,\u201d she said \u2014 it\u2019s John\u2019s \u2018book\u2019\u2026",
    "Symbols: \u2211\u222b\u221a\u221e \u2264\u2265\u2260 \u00b1\u00d7\u00f7 \u20ac12 \u00a33 \u00a54 \u20b95 \u00a9 \u00ae \u2122 37\u00b0C \u00b5s \u00bd \u00be x\u00b2 y\u00b3",
    "Ligatures and widths: \ufb01le \ufb02ow \uff21\uff22\uff23 \uff11\uff12\uff13 \u216b \u2460\u2461\u2462.",
    "Zero\u200bwidth\u200bspaces and no\u00a0break\u00a0spaces, thin\u2009spaces, em\u2003spaces, ideographic\u3000space.",
]

EMOJI = [
    "👋🌍", "😀😃😄😁", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽👍🏿", "🇩🇪🇯🇵🇧🇷", "❤️", "✨🔥💯", "🤖🧠",
    "🎉🎉🎉", "☕️", "🚀 to the 🌕", "👩🏻‍💻", "1️⃣2️⃣3️⃣",
]

CODE = [
    "def tokenize(text: str) -> list[int]:\n    ids = []\n    for piece in PATTERN.findall(text):\n"
    "        ids.extend(bpe(piece))  # merge\n    return ids\n",
    "int main(int argc, char** argv) {\n\tstd::vector<int64_t> ids{1, 2, 3};\n\tif (argc > 1 && ids.size() >= 3) {\n"
    "\t\treturn ids[0] << 2;\n\t}\n\treturn 0;\n}\n",
    '{"name": "xtrain", "version": "0.1.0", "layers": [1, 2, 3], "ok": true, "ratio": 0.125}\n',
    '<div class="note" id=\'x1\'><p>Hello &amp; welcome!</p><br/></div>\n',
    "for f in *.txt; do grep -c 'foo\\|bar' \"$f\" | sort -n >> /tmp/out.log 2>&1; done\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;\n",
    "x = [i**2 for i in range(10) if i % 3 != 0]; y = {k: v for k, v in zip('abc', x)}\n",
    "    if (x != nullptr) { x->next = y; }    // four leading spaces, trailing spaces    \n",
    "fn main() { let v: Vec<u8> = b\"bytes\".to_vec(); println!(\"{:?}\", v); }\r\n",
    "const re = /^(?:[a-z0-9_.+-]+)@([a-z]+)\\.(com|org)$/i; // regex in code\n",
]

NUMBERS = [
    "3141592653589793238462643383279502884197169399375105820974944592",
    "1,234,567.89", "-0.000123", "6.022e23", "2024-03-15T12:34:56Z", "+1 (555) 123-4567",
    "0xDEADBEEF", "192.168.0.1", "v2.10.3", "99.9%", "1/2", "$1,000,000", "١٢٣٤", "１２３４５",
    "0000000000", "12345678901234567890123456789012345678901234567890",
]

MARKERS = ["<|endoftext|>", "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_end|>\n", "<|fim_prefix|>",
           "<|endoftext|><|endoftext|>", "<|im_end|><|im_start|>", "<mask>", " <mask> "]

WEB = ["https://example.com/path/to/page?q=tokenizer&lang=en#section-2", "user.name+tag@example.co.uk",
       "C:\\Users\\alice\\Documents\\notes.txt", "/usr/local/lib/python3.11/site-packages/"]

WORDS = ["iPhone15Pro", "snake_case_name", "CamelCaseWord", "ALLCAPS", "x86_64", "C++17", "naïveté", "e-mail",
         "O'Neil", "don't", "DON'T", "can't've", "ma'am", "'tis", "rock'n'roll", "it’s", "WE’LL", "l'homme"]

SEPARATORS = [" ", " ", " ", "  ", "\n", "\n", "\n\n", "\n\n\n", "\t", "\r\n", " \n", "   \n", "\n    ", "\u00a0",
              "\u3000", "\x0b", "\x0c", "\u2028", "    ", "\t\t"]

RUNS = [lambda r: " " * r.randint(2, 80), lambda r: "\n" * r.randint(2, 12), lambda r: "\t" * r.randint(2, 9),
        lambda r: " \n" * r.randint(2, 6), lambda r: "=" * r.randint(3, 60), lambda r: "-" * r.randint(3, 40),
        lambda r: "a" * r.randint(5, 70), lambda r: "!?" * r.randint(2, 10), lambda r: "." * r.randint(3, 30),
        lambda r: "".join(r.choice("0123456789") for _ in range(r.randint(10, 300))),
        lambda r: "😀" * r.randint(2, 20), lambda r: "ab" * r.randint(10, 200)]


def fragment(r: random.Random) -> str:
    kind = r.random()
    if kind < 0.40:
        text = r.choice(PROSE)
        if r.random() < 0.1:
            text = text.upper()
        elif r.random() < 0.1:
            text = text.lower()
        return text
    if kind < 0.52:
        return r.choice(CODE)
    if kind < 0.62:
        return r.choice(NUMBERS) + " " + str(r.randint(0, 10 ** r.randint(1, 12)))
    if kind < 0.70:
        return " ".join(r.choice(EMOJI) for _ in range(r.randint(1, 4)))
    if kind < 0.77:
        return r.choice(MARKERS)
    if kind < 0.83:
        return r.choice(WEB)
    if kind < 0.92:
        return " ".join(r.choice(WORDS) for _ in range(r.randint(1, 6)))
    return r.choice(RUNS)(r)


BERT_CASES = [
    "[CLS] H\u00e9llo w\u00f6rld [SEP] [MASK] is [mask] [PAD][UNK] in the middle[SEP]of a word [ CLS ]",
    "Accents: \u00e9 \u00f1 \u00c4 \u00e7 \u00c5NGSTR\u00d6M \u00c7a va? Se\u00f1or M\u00fcller's caf\u00e9 \u2014 na\u00efve "
    "fa\u00e7ade; \u0130stanbul \u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3 \u01c5 \ufb01 \u1e9e\u00df \u212b",
    "CJK: \u4e2d\u6587 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4 \u6f22\u5b57\u304b\u306a\u4ea4\u3058\u308a\u6587 \u3400\u4dbf\u4dc0 "
    "\u9fff\ua000 \uf900\ufaff\ufb00 \U00020000\U0002a6df\U0002a6e0 \U0002a700\U0002b81f\U0002b820\U0002b91f"
    "\U0002b920\U0002ceaf\U0002ceb0 \U0002f800\U0002fa1f\U00030000 \u2e80\u3005\u3007",
    "Quotes and dashes: \u201cdouble\u201d \u2018single\u2019 \u201elow\u201c \u00abguillemets\u00bb \u2039one\u203a "
    "a\u2014b a\u2013b a\u2010b a\u2011b a\u2012b a\u2015b a\u2e3ab a\u2e3bb wait\u2026 \u203d \u2042 \u301c "
    "\u300c\u62ec\u5f27\u300d\u300e\u4e8c\u91cd\u300f\u3010\u9685\u3011 \uff01\uff1f\uff08x\uff09 \u00a1\u00bf \u00a7\u00b6 "
    "$5+3<4=2>1^`|~ \u2e43\u2e4f \u166d \U000111c9 @#%&*_\\/",
    "Controls: NUL\x00x SOH\x01x DEL\x7fx ESC\x1b[0m BEL\x07 VT\x0bFF\x0cNEL\x85x ZWSP\u200bZWJ\u200dBOM\ufeffx "
    "RLM\u200fx SHY\u00adx LRI\u2066x\u2069 replacement\ufffdx private\ue000\U000f0000x tag\U000e0041x "
    "sep\u2028line\u2029para nbsp\u00a0x ideographic\u3000x ogham\u1680x mongolian\u180ex",
    "Marks: a\u0301\u0316\u0334 e\u0300\u0323 o\u0308\u0304 n\u0303 \u0915\u094d\u0937 \u1734 \u1885\u1886 "
    "\ua9bd \U00011938 \u08d4 a\u1ac1b a\u1df6\u0334 x\u20ddx \u0e31\u0e47 \u302a\u3099",
    "Digits: 0123456789 \u0660\u0661\u0662\u0663 \uff10\uff11\uff12 \u00bd \u00b2 \u2460 3.14159 1,000,000 2024-03-15",
    "Emoji: \U0001f600 \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f3f3\ufe0f\u200d\U0001f308 "
    "\U0001f44d\U0001f3fd \U0001f1e9\U0001f1ea \u2764\ufe0f \U0001f972 \U0001fae0",
    "Long: " + "antidisestablishmentarianism" * 4 + " " + "x" * 100 + " " + "y" * 101 + " " + "\u00e9" * 100 + " "
    + "e\u0301" * 100 + " " + "\u4e2d" * 120 + " " + "ab-" * 60,
    "Out of vocabulary: qwxzv zzyzx Xylophonists' bdellium \ua66e \u16a0\u16c7\u16bb \u2d63 \u2c00 \U00010330\U00010339",
    "Newer letters: \u1c89 \ua7cb\ua7cc \U00010d50\U00010d65 \U00016ea0 \u0130 \u03a3 \u1e9e \u2c2f \uab70",
]


def make_bert_cases() -> str:
    return "\n".join(BERT_CASES) + "\n"


def make_code_point_sweep() -> str:
    planes = [range(0, 0x40000), range(0xE0000, 0xE0200), range(0xF0000, 0xF0100), range(0x10FF00, 0x110000)]
    words = ["x" + chr(c) + "x" for plane in planes for c in plane if not 0xD800 <= c <= 0xDFFF]
    return "\n".join(" ".join(words[i:i + 64]) for i in range(0, len(words), 64)) + "\n"


def make_text(size: int, seed: int) -> str:
    r = random.Random(seed)
    parts = []
    length = 0
    while length < size:
        part = fragment(r) + r.choice(SEPARATORS)
        parts.append(part)
        length += len(part.encode("utf-8"))
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=120_000, help="bytes of UTF-8 to write at least")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bert-cases", action="store_true", help="append the cases of BERT's normalizer")
    parser.add_argument("--code-point-sweep", action="store_true", help="write the code point sweep instead")
    args = parser.parse_args()
    if args.code_point_sweep:
        text = make_code_point_sweep()
    else:
        text = make_text(args.size, args.seed) + (make_bert_cases() if args.bert_cases else "")
    sys.stdout.buffer.write(text.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
