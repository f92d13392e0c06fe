"""Hand-made text for the golden vectors: what the shipped English data lacks.

Accents, non-Latin scripts, numbers, punctuation, compatibility characters
(ligatures, full width, math letters), invisible and control characters: the
places where a tokenizer port goes wrong.
"""

# (id, passage, question, answer): a question whose answer is in the passage.
HANDMADE = [
    ("fr", "Le Café de Flore, à Paris, fut fondé vers 1887. Jean-Paul Sartre "
     "et Simone de Beauvoir y écrivaient l'hiver, près du poêle. "
     "Aujourd'hui, un café crème coûte 6,50 €.",
     "Qui écrivait au Café de Flore ?",
     "Jean-Paul Sartre et Simone de Beauvoir"),
    ("de", "Die Straße führt über die Brücke nach Köln. Größere Städte wie "
     "München und Düsseldorf liegen weiter südlich. Der Fluß heißt Rhein.",
     "Wie heißt der Fluß?", "Rhein"),
    ("es", "El niño comió piñas en la montaña. ¿Cuántas? ¡Muchísimas! Su "
     "abuela, Doña Inés, vivía en Córdoba desde 1952.",
     "¿Dónde vivía Doña Inés?", "Córdoba"),
    ("el", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. Ο Παρθενώνας χτίστηκε τον "
     "5ο αιώνα π.Χ. στην Ακρόπολη. ΣΊΣΥΦΟΣ ήταν βασιλιάς.",
     "Πού χτίστηκε ο Παρθενώνας;", "στην Ακρόπολη"),
    ("ru", "Москва — столица России. Река Москва протекает через город. "
     "В 1147 году Юрий Долгорукий основал город.",
     "Кто основал город?", "Юрий Долгорукий"),
    ("ar", "القاهرة هي عاصمة مصر. يمر نهر النيل عبر المدينة منذ آلاف السنين.",
     "ما هي عاصمة مصر؟", "القاهرة"),
    ("he", "ירושלים היא עיר עתיקה. הכותל המערבי נמצא בעיר העתיקה.",
     "איפה נמצא הכותל המערבי?", "בעיר העתיקה"),
    ("hi", "दिल्ली भारत की राजधानी है। यमुना नदी शहर से होकर बहती है।",
     "भारत की राजधानी क्या है?", "दिल्ली"),
    ("zh", "北京是中国的首都。长城位于北京北部，全长两万多公里。",
     "长城位于哪里？", "北京北部"),
    ("ja", "東京は日本の首都です。富士山の高さは3776メートルです。",
     "富士山の高さは？", "3776メートル"),
    ("ko", "서울은 한국의 수도입니다. 한강이 도시를 가로질러 흐릅니다.",
     "한국의 수도는 어디입니까?", "서울"),
    ("vi", "Hà Nội là thủ đô của Việt Nam. Sông Hồng chảy qua thành phố.",
     "Thủ đô của Việt Nam là gì?", "Hà Nội"),
    ("th", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย และมีประชากรมาก",
     "เมืองหลวงของประเทศไทยคืออะไร", "กรุงเทพมหานคร"),
    ("numbers", "The bridge opened on 12/05/1937 at 09:30. It is 2,737.4 m "
     "long, cost $35,000,000 (≈ €32.5M), and carries 112,000 vehicles/day "
     "— about 1.12e5, or 3.5% more than in 2019.",
     "How long is the bridge?", "2,737.4 m"),
    ("punctuation", "Wait... what?!? (No—really.) \"Quotes\", 'single', "
     "«guillemets», „German“, [brackets]; {braces}: <angle> & pipe | tilde ~ "
     "caret ^ `tick` @at #hash %percent *star _under +plus =equals "
     "\\backslash /slash.", "What comes after the ampersand?", "pipe"),
    ("compatibility", "Ǆemal wrote ½ of the ﬁnal ﬁle… then ＦＵＬＬＷＩＤＴＨ "
     "text, 𝐁𝐨𝐥𝐝 math, İstanbul, STRAẞE, ꭰꮎꮝ, cafe\u0301 au lait, "
     "zero\u200bwidth, soft\u00adhyphen, emoji 😀🎉 and 𠀀𠀁 hanzi.",
     "What did Ǆemal write?", "½ of the ﬁnal ﬁle"),
    ("whitespace", "Line one\tcolumn\r\nLine two\u0085next\u2028separator"
     "\u00a0nbsp\u3000ideographic space\u000bvertical tab.",
     "What is the second line?", "Line two"),
]

# Sentences for the tokenizer alone: the edges of normalization and splitting.
EXTRA_SENTENCES = [
    "Héllo, wörld! The café's price: $3.50 — naïve résumé.",
    "Ünïcödé façade, Ångström, smörgåsbord; coöperate.",
    "Ελληνικά, русский язык, العربية, עברית and हिन्दी.",
    "中文字符 日本語のテキスト 한국어 mixed with English.",
    "Numbers: 1,234,567.89 3.14159 1e-10 2nd 42% #1 @home",
    "Punctuation!!! ... ??? (brackets) [square] {curly} <angle> \"quotes\"",
    "Control\tchars\u00a0and  multiple   spaces\u200b zero-width.",
    "unaffable antidisestablishmentarianism supercalifragilistic",
    "a" * 100 + " " + "b" * 101 + " " + "é" * 60 + " " + "ab\u0301" * 40,
    "",
    "   ",
    "ǅemal ǆ Ǆ ½ ¼ ⅞ ﬁ ﬂ ﬀ ﬃ … ‥ № ™ ℃ ㎏ ㍿ ① ⑩ Ⅻ ⓐ",
    "Straße STRASSE ẞ İstanbul ıi ς Σ ΣΑΣ ϐϑϕϖ ſt ﬅ",
    "ＦＵＬＬＷＩＤＴＨ ｈａｌｆ ｶﾀｶﾅ 𝐁𝐨𝐥𝐝 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝟙𝟚𝟛",
    "Ꭰꭰ ᏣᎳᎩ ꮳꮃꭹ Cherokee",
    "soft\u00adhyphen zero\u200bwidth joiner\u200dx non\u200cjoiner "
    "bom\ufeffmark lrm\u200em",
    "tab\tnewline-less vertical\u000btab form\u000cfeed nel\u0085 "
    "line\u2028para\u2029end",
    "null\u0000char bell\u0007 escape\u001b del\u007f c1\u0080\u009f",
    "emoji 😀😃🎉👍🏽 👨‍👩‍👧 flags 🇫🇷 keycap 1️⃣",
    "𠀀𠀁𪚥 rare CJK, 〇 ideographic zero, 々 repeat, ㄅㄆ bopomofo",
    "กรุงเทพมหานคร ภาษาไทยไม่มีช่องว่าง",
    "देवनागरी क्षत्रिय संस्कृतम् ক্ষ বাংলা ਪੰਜਾਬੀ",
    "Vietnamese: Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ ố ồ ổ ỗ ộ ư ơ đ Đ",
    "Arabic with harakat: مُحَمَّد and Persian ی ک ۱۲۳ digits ٤٥٦",
    "Hebrew niqqud: שָׁלוֹם עֲבָרִית",
    "Math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ ≤ ∞; √2 ≈ 1.414; a≠b; f′(x) → ∂y/∂x",
    "Currency: $5 €5 £5 ¥5 ₹5 ₩5 ₿0.1 5¢ — prices (ex. VAT).",
    "URLs: https://example.com/a?b=c&d=e#f, user@example.org, C:\\path\\to",
    "Dashes: a-b a–b a—b a―b a‐b a‑b a−b; quotes: ‘a’ “b” ‚c‛ ‹d› «e»",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 s\u030c z\u0307 "
    "i\u0307 \u0301alone",
    "Hangul jamo: \u1100\u1161\u11a8 vs 각; halfwidth ﾡ; filler \u3164x",
    "Variation selectors: ☃\ufe0f ☃\ufe0e 葛\U000e0100 end",
    "Private use \ue000 and unassigned \u0378 and noncharacter \ufdd0",
    "Long number 123456789012345678901234567890 and 3.141592653589793238",
    "CamelCaseWord snake_case_word kebab-case-word dot.separated.word",
    "It's John's; don't won't can't y'all 'tis rock'n'roll",
    "MIXED case WoRdS and ALL CAPS SENTENCE WITH NUMBERS 2024",
    "e.g. i.e. etc. U.S.A. Ph.D. a.m. p.m. No. 5",
    "Repeated!!!!!!!!!!!!!!!!!!!!! ????????? ...... ------ ______",
    "Armenian Հայերեն, Georgian ქართული, Ethiopic አማርኛ, Tamil தமிழ்",
    "Tibetan བོད་ཡིག Mongolian ᠮᠣᠩᠭᠣᠯ Khmer ខ្មែរ Lao ລາວ Burmese မြန်မာ",
]
