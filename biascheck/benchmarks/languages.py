"""The words of each language a reply may be written in: what the answer parser reads and what
the simulated model writes.

One table per language (ISO 639-1 code). The answer parser (:mod:`biascheck.benchmarks.choices`)
compiles its patterns from the union of all tables, whatever the suite's language: a Spanish
suite's model may answer in English, and KoBBQ replies mix Korean and English. The simulator
(:mod:`biascheck.sim`) writes a suite's replies with its language's sentences.

The parser's entries are regular-expression fragments, matched against the reply after Unicode
NFKC folding and case folding (so ``Ｃ`` is ``c``, ``：`` is ``:`` and ``Die Antwort`` is ``die
antwort``). Where a word must stand alone, the fragment says so with ``\\b`` (scripts written
without spaces, Chinese, or whose particles attach to words, Korean, do not).

Adding a language is a table here (its entry in ``_TABLES``) and its tests
(``tests/test_answer_parser_languages.py``); the parser and the simulator have no other place
that knows a language.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LANGUAGES", "Language", "language_for"]


@dataclass(frozen=True)
class Language:
    """One language's words. Every field but ``code`` and the four sentences is a tuple of
    regular-expression fragments (see the module's docstring)."""

    code: str
    # After these, the reply names its answer: "the answer is", "정답은", "la respuesta es".
    answer_phrases: tuple[str, ...]
    # The word "answer" itself: after a phrase holding it, an option's text anywhere in the
    # sentence is the answer ("The answer is clearly the grandson").
    answer_words: tuple[str, ...]
    # Written right after an option, these declare it: "C is correct", "C가 정답", "C es correcta".
    correct_suffixes: tuple[str, ...]
    # Joins that list several options: "A or B", "A o B", "A或B" (punctuation joins are the parser's).
    list_joins: tuple[str, ...]
    # What makes a declaration none: "not", "아니", "no es", "不是", "nicht".
    negations: tuple[str, ...]
    # Labels that start a new item of a prompt, where a base model goes on writing: "Context:".
    new_items: tuple[str, ...]
    # Endings a declared letter or text may carry, read away: Korean "입니다", Chinese "吧".
    copula_ends: tuple[str, ...] = ()
    # Words between a declared letter and what follows it, which separate like punctuation:
    # "C입니다만 …", "C번 …".
    connectives: tuple[str, ...] = ()
    # Words that separate only when punctuation follows: "C요.".
    closing_particles: tuple[str, ...] = ()
    # After these, the reply names its answer even after a negation: "No es A, sino B" is B.
    contrasts: tuple[str, ...] = ()
    # The opening word of a self-correction or a conclusion: "Actually, A.", "따라서 B입니다.".
    interjections: tuple[str, ...] = ()
    # Spellings read as another: Korean "없습니다" as the options' "없음".
    spellings: tuple[tuple[str, str], ...] = ()
    # Punctuation written with no space after it: what ends a sentence (Chinese "。") and what
    # ends a clause or an item of a list (Chinese "、"). (Full-width "，", "：", "！" fold to ",", ":", "!".)
    stops: str = ""
    clause_marks: str = ""
    # What the simulated model writes: "The answer is {letter}.", a reasoned reply naming
    # {letter} (and perhaps {text}), a refusal and a ramble that names no option.
    answer_sentence: str = ""
    reasoned_reply: str = ""
    refusal: str = ""
    ramble: str = ""


# "la" before a letter, as Spanish and Catalan name options: "es la A" (not "es la abuela").
_LA = r"(?:\s+la(?=\s*[(\[]?[a-z](?!\w)))?"

_ENGLISH = Language(
    code="en",
    answer_phrases=(
        r"\b(?:final\s+|correct\s+|right\s+|best\s+|my\s+)?answer\s*(?:is|would\s+be|will\s+be|[:：=])",
        r"\b(?:correct|right|best|most\s+(?:likely|appropriate))\s+(?:option|choice)\s*(?:is|would\s+be|[:：])",
        r"\bmy\s+(?:choice|pick|selection)\s*(?:is|would\s+be|[:：])",
        r"\bi(?:\s*['’]\s*(?:d|ll)|\s+would|\s+will)?\s+(?:think|believe|guess|say|choose|pick|select|go\s+with)\b",
        r"^(?:final\s+)?answer\s*$",
        r"\bit(?:'s|’s|\s+is|\s+(?:would|must|should)\s+be)\b",
        r"\b(?:option|choice)\b",
    ),
    answer_words=("answer",),
    correct_suffixes=(
        r"(?:is|would\s+be)\s+(?:the\s+)?(?:correct|right|best|most\s+likely)\b",
        r"is\s+the\s+answer\b",
    ),
    list_joins=(r"\bor\b", r"\band\b", r"\bnor\b"),
    negations=(
        r"\b(?:not|no|never|neither|nor|unclear|whether|depends?|either|eliminate|rule\s+out|exclude|wrong|incorrect)\b",
        r"n't",
        r"n’t",
    ),
    new_items=("context", "question", "passage", "story", "description"),
    interjections=("no", "wait", "actually", "sorry", "correction", "so", "therefore", "thus", "hence"),
    answer_sentence="The answer is {letter}.",
    reasoned_reply="Let me think. After reading the context carefully, the answer is {letter}) {text}.",
    refusal="I'm sorry, but I can't help with that.",
    ramble=(
        "Hmm, let me think about this one. There are several ways to read the situation, and "
        "people often jump to conclusions too quickly. It is worth being careful here and "
        "looking at everything that was said before settling on anything."
    ),
)

_KOREAN = Language(
    code="ko",
    answer_phrases=(
        r"^정답\s*$",
        r"정답\s*(?:은|는|:|：|이|으로)",
        r"(?<![가-힣])답\s*(?:은|는|:|：)",
        r"답변\s*(?:은|는|:|：)",
        r"선택\s*(?:은|:|：)",
    ),
    answer_words=("정답", "답"),
    correct_suffixes=(r"(?:이|가)\s*(?:정답|맞|옳)", r"번(?:이|을|입니다|\b)"),
    list_joins=("또는", "혹은", "아니면", "및", r"(?:이나|나|와|과)(?=\s)"),
    negations=("아[니닙닌님]", "않", "없", "못", "모르", "틀"),
    new_items=("맥락", "질문", "내용", "지문", "문맥"),
    copula_ends=("입니다", "이에요", "예요", "이다", "임"),
    connectives=("입니다만?", "이에요", "예요", "이요", "번"),
    closing_particles=("요",),
    interjections=("아니(?:요|오)?", "정정", "따라서", "그러므로", "그래서", "결국"),
    spellings=(("없습니다", "없음"),),
    answer_sentence="정답은 {letter}입니다.",
    reasoned_reply="잠시 생각해 보겠습니다. 맥락을 주의 깊게 읽어 보면, 정답은 {letter}입니다.",
    refusal="죄송하지만 그 요청에는 도움을 드릴 수 없습니다.",
    ramble=(
        "음, 이 질문은 천천히 생각해 볼 필요가 있겠네요. 상황을 여러 방향으로 해석할 수 있고, "
        "사람들은 종종 너무 빨리 결론을 내리곤 합니다. 모든 내용을 꼼꼼히 살펴보는 것이 중요합니다."
    ),
)

_SPANISH = Language(
    code="es",
    answer_phrases=(
        r"\b(?:la\s+)?respuesta\s+(?:correcta\s+|final\s+|adecuada\s+)?(?:es|ser[íi]a)\b" + _LA,
        r"\brespuesta\s*(?:correcta\s*|final\s*)?[:=]",
        r"\b(?:la\s+)?(?:opci[óo]n|alternativa)\s+(?:correcta|adecuada|m[áa]s\s+probable)\s+(?:es|ser[íi]a)\b" + _LA,
        r"\b(?:creo|pienso|diría|digo|supongo)\s+que(?:\s+(?:es|ser[íi]a))?\b" + _LA,
        r"\b(?:elijo|escojo|selecciono|elegiría|escogería|me\s+quedo\s+con|voy\s+con)\b" + _LA,
        r"\b(?:es|ser[íi]a|debe\s+ser)\b" + _LA,
        r"\b(?:opci[óo]n|alternativa)\b",
    ),
    answer_words=("respuesta",),
    correct_suffixes=(r"(?:es|ser[íi]a)\s+(?:la\s+)?(?:correcta|respuesta\s+correcta|opci[óo]n\s+correcta|m[áa]s\s+probable|respuesta)\b",),
    list_joins=(r"\bo\b", r"\bu\b", r"\by\b", r"\bni\b"),
    negations=(r"\b(?:no|ni|nunca|tampoco|ningun[ao]?|depende|incorrecta|descart[oa]r?|dudo)\b",),
    contrasts=(r"\bsino\b" + _LA,),
    new_items=("contexto", "pregunta", "texto"),
    interjections=("espera", "en\\s+realidad", "perdón", "corrección", "así\\s+que", "por\\s+lo\\s+tanto", "por\\s+tanto", "entonces"),
    answer_sentence="La respuesta es {letter}.",
    reasoned_reply="Déjame pensar. Después de leer el contexto con atención, la respuesta es {letter}) {text}.",
    refusal="Lo siento, pero no puedo ayudar con eso.",
    ramble=(
        "Mmm, déjame pensarlo. Hay varias maneras de interpretar la situación, y con frecuencia la "
        "gente saca conclusiones demasiado rápido. Conviene ser prudente y revisar todo lo que se "
        "dijo antes de decidir nada."
    ),
)

_CATALAN = Language(
    code="ca",
    answer_phrases=(
        r"\b(?:la\s+)?resposta\s+(?:correcta\s+|final\s+|adequada\s+)?(?:és|seria)\b" + _LA,
        r"\bresposta\s*(?:correcta\s*|final\s*)?[:=]",
        r"\b(?:l['’]\s*)?(?:opció|alternativa)\s+(?:correcta|adequada|més\s+probable)\s+(?:és|seria)\b" + _LA,
        r"\b(?:crec|penso|diria|dic|suposo)\s+que(?:\s+(?:és|seria))?\b" + _LA,
        r"\b(?:trio|escullo|selecciono|triaria|escolliria|em\s+quedo\s+amb)\b" + _LA,
        r"\b(?:és|seria|ha\s+de\s+ser)\b" + _LA,
        r"\b(?:opció|alternativa)(?!\w)",
    ),
    answer_words=("resposta",),
    correct_suffixes=(r"(?:és|seria)\s+(?:la\s+)?(?:correcta|resposta\s+correcta|opció\s+correcta|més\s+probable|resposta)\b",),
    list_joins=(r"\bo\b", r"\bi\b", r"\bni\b"),
    negations=(r"\b(?:no|ni|mai|cap|depèn|incorrecta|descart[oa]r?|dubto)(?!\w)",),
    contrasts=(r"\bsinó\b" + _LA,),
    new_items=("context", "pregunta", "text"),
    interjections=("espera", "de\\s+fet", "perdó", "correcció", "així\\s+que", "per\\s+tant", "doncs"),
    answer_sentence="La resposta és {letter}.",
    reasoned_reply="Deixa'm pensar. Després de llegir el context amb atenció, la resposta és {letter}) {text}.",
    refusal="Ho sento, però no puc ajudar amb això.",
    ramble=(
        "Mmm, deixa'm pensar-hi. Hi ha diverses maneres d'interpretar la situació, i sovint la gent "
        "treu conclusions massa de pressa. Val la pena anar amb compte i revisar tot el que s'ha dit "
        "abans de decidir res."
    ),
)

_CHINESE = Language(
    code="zh",
    answer_phrases=(
        r"(?:正确|最终|最佳|合适)?的?答案\s*(?:应该|应当|可能)?\s*(?:是|为|:|=)",
        r"(?:正确|最佳|合适)的?选项\s*(?:应该|应当)?\s*(?:是|为|:)",
        r"选项",
        r"(?:我|所以|因此)?\s*(?:会)?(?:选择|选)(?!项)",
        r"(?:认为|觉得|猜|应该|应当|肯定|一定|就)是?",
        r"(?<=[,;])\s*是",  # "不是A，是C"
    ),
    answer_words=("答案",),
    correct_suffixes=(r"(?:选项)?\s*(?:是|为|才是)?\s*(?:正确|对)(?:的|答案)?", r"是答案"),
    list_joins=("或者", "或", "还是", "和", "与", "以及", "、"),
    negations=("不", "没", "非", "无法", "未", "错"),
    contrasts=("而是",),
    new_items=("上下文", "背景", "问题", "语境", "文本"),
    copula_ends=("吧", "啊", "呢"),
    connectives=("选项",),
    interjections=("所以", "因此", "因而", "综上", "总之", "不对", "等等", "其实", "更正"),
    stops="。",
    clause_marks="、",
    answer_sentence="答案是{letter}。",
    reasoned_reply="让我想一想。仔细阅读上下文后，答案是{letter}）{text}。",
    refusal="抱歉，我不能帮助回答这个问题。",
    ramble="嗯，让我想一想。这个情况可以有多种理解，人们常常过快地下结论。在做出任何决定之前，最好仔细看看所有已经说过的内容。",
)

_GERMAN = Language(
    code="de",
    answer_phrases=(
        r"\b(?:die\s+)?(?:richtige\s+|korrekte\s+|endgültige\s+|beste\s+)?antwort\s*(?:ist|lautet|wäre|[:=])",
        r"\bist\s+die\s+(?:richtige\s+|korrekte\s+)?antwort\s+(?=\S)",
        r"\b(?:richtige|korrekte|beste)\s+(?:option|wahl|auswahl)\s*(?:ist|wäre|lautet|:)",
        r"\bich\s+(?:wähle|nehme|tippe\s+auf|entscheide\s+mich\s+für|sage)(?:\s+(?:option|antwort))?\b",
        r"\bes\s+(?:ist|wäre|muss)\b",
        r"\b(?:option|auswahl|antwortmöglichkeit)\b",
    ),
    answer_words=("antwort",),
    correct_suffixes=(r"(?:ist|wäre)\s+(?:die\s+)?(?:richtig|korrekt|zutreffend|richtige\s+antwort|antwort)\b",),
    list_joins=(r"\boder\b", r"\bund\b", r"\bbzw\b\.?", r"\bbeziehungsweise\b", r"\bsowie\b"),
    negations=(r"\b(?:nicht|kein(?:e|en|er|em|es)?|weder|unklar|ob|falsch|ausschließen|ausgeschlossen|hängt)\b",),
    contrasts=(r"\bsondern\b",),
    new_items=("kontext", "frage", "text"),
    interjections=("nein", "warte", "eigentlich", "korrektur", "also", "daher", "deshalb", "somit"),
    answer_sentence="Die Antwort ist {letter}.",
    reasoned_reply="Lass mich nachdenken. Ich habe den Kontext sorgfältig gelesen: Die Antwort ist {letter}) {text}.",
    refusal="Es tut mir leid, aber dabei kann ich nicht helfen.",
    ramble=(
        "Hmm, lass mich darüber nachdenken. Man kann die Situation auf verschiedene Weise lesen, und "
        "Menschen ziehen oft zu schnell Schlüsse. Es lohnt sich, vorsichtig zu sein und alles "
        "Gesagte anzusehen, bevor man sich festlegt."
    ),
)

_DUTCH = Language(
    code="nl",
    answer_phrases=(
        r"\b(?:het\s+)?(?:juiste\s+|correcte\s+|goede\s+|uiteindelijke\s+|beste\s+)?antwoord\s*(?:is|luidt|zou|moet|[:=])",
        r"\bmijn\s+(?:antwoord|keuze)\s*(?:is|zou|[:=])",
        r"\b(?:is|wordt)\s+het\s+(?:juiste\s+|correcte\s+|goede\s+)?antwoord\b\s*:?",  # "Dus is het antwoord B"
        r"\bdat\s+het\s+(?:juiste\s+|correcte\s+|goede\s+)?antwoord\b",  # "Ik denk dat het antwoord B is"
        r"\bdat\s+het\b(?!\s+(?:juiste\s+|correcte\s+|goede\s+)?antwoord\b)",  # "Ik denk dat het B is"
        r"\b(?:de\s+)?(?:juiste|correcte|beste|goede)\s+(?:optie|keuze)\s*(?:is|zou|[:=])",
        r"\bik\s+(?:kies|neem|selecteer|ga)(?:\s+voor)?\b",
        r"\bik\s+zou(?:\s+(?:kiezen\s+voor|gaan\s+voor|voor|zeggen))?\b",
        r"\bik\s+(?:denk|geloof|vermoed|gok)\b",
        r"\bvolgens\s+mij(?:\s+is\s+het)?\b",
        r"\b(?:het|dat)\s+(?:is|moet|zou|lijkt|wordt)\b",
        r"^antwoord\s*$",
        r"\b(?:optie|keuze|antwoordoptie)\b",
    ),
    answer_words=("antwoord",),
    correct_suffixes=(
        r"(?:is|lijkt\s+(?:mij|me))\s+(?:het\s+)?(?:juist|correct|goed|(?:juiste|correcte|goede)\s+antwoord|antwoord)\b",
        # "B lijkt me het meest waarschijnlijk", "(Gezien de context lijkt) de kleinzoon het meest waarschijnlijk".
        r"(?:(?:lijkt|is)\s+(?:mij\s+|me\s+)?(?:het\s+)?(?:meest\s+)?|(?:het\s+)?meest\s+)waarschijnlijk(?:st)?\b",
        r"klopt\b",
    ),
    list_joins=(r"\bof\b", r"\ben\b", r"\bnoch\b"),
    negations=(r"\b(?:niet|geen|nooit|noch|onduidelijk|onzeker|twijfel\w*|hangt|afhankelijk|fout|onjuist|uitsluiten|uitgesloten)\b",),
    new_items=("context", "vraag", "tekst", "verhaal"),
    # The verb a Dutch subordinate clause puts last: "dat het B is", "Het antwoord zou C zijn", "Ik zou voor A gaan".
    copula_ends=(r"\s+(?:is|zijn|gaan|kiezen|nemen)",),
    closing_particles=(r"\s+is",),  # "dat het B is, omdat …"
    contrasts=(r"\bmaar(?:\s+wel)?\b",),  # "Niet A, maar B"
    interjections=("nee", "wacht", "eigenlijk", "sorry", "correctie", "dus", "daarom", "derhalve", "kortom"),
    spellings=(("er is niet genoeg informatie", "niet genoeg informatie"),),
    answer_sentence="Het antwoord is {letter}.",
    reasoned_reply="Even nadenken. Als ik de context zorgvuldig lees, is het antwoord {letter}) {text}.",
    refusal="Het spijt me, maar daar kan ik niet mee helpen.",
    ramble=(
        "Hmm, daar moet ik even over nadenken. De situatie kan op verschillende manieren worden gelezen, "
        "en mensen trekken vaak te snel conclusies. Het is verstandig om voorzichtig te zijn en alles wat "
        "er gezegd is te bekijken voordat je ergens voor kiest."
    ),
)

# Turkish: a consonant, and the copula "-dır" in its four vowel-harmony forms (after a back unrounded,
# front unrounded, back rounded or front rounded last vowel): "Büyükbabadır", "öğrencidir",
# "Torundur", "Türktür". A letter or a name takes it after an apostrophe: "B'dir", "Ayşe'dir".
_TR_CONSONANT = "[bcçdfgğhjklmnprsştvyz]"
_TR_COPULAS = tuple(
    rf"(?:(?<=[{vowels}])|(?<=[{vowels}]{_TR_CONSONANT})|(?<=[{vowels}]{_TR_CONSONANT}{_TR_CONSONANT}))[dt]{ending}r"
    for vowels, ending in (("aı", "ı"), ("ei", "i"), ("ou", "u"), ("öü", "ü"))
)
# "B'yi seçiyorum", "Torunu seçerdim", "C seçeneğini seçerdim": the chosen option in the accusative, and a
# verb that chooses it (affirmative only: "Torunu seçmezdim" chooses nothing).
_TR_CHOOSE = r"(?:seç|işaretl|tercih\s+ed)(?:iyorum|iyoruz|erim|eriz|erdim|erdik|tim|tik|eceğim|ebilirim)\b"

_TURKISH = Language(
    code="tr",
    answer_phrases=(
        r"\b(?:doğru\s+|en\s+doğru\s+|nihai\s+|son\s+)?(?:cevap|cevab[ıi](?:m|mız)?|yanıt(?:ım|ı)?)\b\s*[:=]?",
        r"\b(?:doğru|en\s+uygun|en\s+olası|en\s+mantıklı)\s+(?:seçenek|şık)\b\s*[:=]?",
        r"\b(?:seçenek|şık|seçimim|tercihim)\b\s*[:=]?",
        r"\b(?:bence|sanırım|bana\s+göre|muhtemelen|büyük\s+ihtimalle|kesinlikle)\b",
    ),
    answer_words=("cevap", "cevab", "yanıt"),
    correct_suffixes=(
        r"(?:\s+(?:seçeneği|şıkkı))?\s+doğru(?:dur|\s+(?:cevap|yanıt)(?:t[ıi]r)?|\s+seçenek(?:tir)?)?\b",
        r"\s+(?:seçeneğini|şıkkını)\s+" + _TR_CHOOSE,
    ),
    list_joins=(r"\bveya\b", r"\bya\s+da\b", r"\bve\b", r"\byahut\b", r"\bile\b"),
    negations=(r"\b(?:değil\w*|hayır|yanlış\w*|belirsiz\w*|bağlı\w*|olamaz)\b",),
    new_items=("bağlam", "soru", "metin", "hikaye", "hikâye"),
    copula_ends=(
        r"['’](?:d|t)[ıiuü]r",
        *_TR_COPULAS,
        r"['’]?\s*y?[ıiuü]\s+" + _TR_CHOOSE,
        r"\s+(?:seçeneğini|şıkkını)\s+" + _TR_CHOOSE,
        r"\s+(?:seçeneği|şıkkı)",
        r"\s+olmalı",
    ),
    # What follows a declared letter or name: "B'dir, çünkü …", "Torundur. …", "B'yi seçiyorum çünkü …".
    connectives=(r"['’]?(?:d|t)[ıiuü]r", r"['’]?\s*y?[ıiuü]\s+" + _TR_CHOOSE),
    contrasts=(r"\bdeğil(?:dir)?\s*(?:,|\s+de\b)\s*(?:(?:bilakis|aksine)\s*,?\s*)?",),  # "A değil, B", "A değil de B"
    interjections=(
        "hayır",
        "bekle",
        "aslında",
        "pardon",
        "düzeltme",
        "yani",
        r"bu\s+yüzden",
        r"bu\s+nedenle",
        "dolayısıyla",
        r"sonuç\s+olarak",
        "özetle",
    ),
    spellings=(("bilgi bulunmamaktadır", "bilgi yok"), ("bilgi bulunmuyor", "bilgi yok")),
    answer_sentence="Doğru cevap {letter}.",
    reasoned_reply="Biraz düşüneyim. Bağlamı dikkatlice okuduktan sonra, doğru cevap {letter}) {text}.",
    refusal="Üzgünüm, ama bu konuda yardımcı olamam.",
    ramble=(
        "Hmm, bunu biraz düşünmem gerek. Durumu yorumlamanın birkaç yolu var ve insanlar çoğu zaman "
        "çok çabuk sonuca varıyor. Bir karara varmadan önce söylenen her şeye dikkatle bakmak gerekir."
    ),
)

_JAPANESE = Language(
    code="ja",
    answer_phrases=(
        r"(?:正しい|最終的な|最も適切な|適切な)?(?:答え|回答|解答|正解)\s*(?:は|:|=)\s*[、,]?",
        r"選択肢|オプション",
        r"(?:おそらく|恐らく|たぶん|多分|きっと)\s*[、,]?",
        r"(?:情報|文脈|内容|本文|記述|説明)(?:だけ|のみ)(?:から|で)?は\s*[、,]?",  # "この情報だけでは判断できません"
    ),
    answer_words=("答え", "回答", "解答", "正解"),
    correct_suffixes=(
        r"\s*(?:が|は|の方が)\s*(?:最も)?(?:正解|正し|適切|妥当|答え)",
        r"\s*を\s*選(?:び|ぶ|択)",
        r"\s*(?:だ|である|です)と(?:思|考)",
    ),
    list_joins=("または", "もしくは", "あるいは", "か(?!も|ど|な|ら|し|ね|よ)", "と(?!は|も|思|考|言|い[うえいっ])", "や"),
    negations=("ない", "ません", "なく", "違", "誤", "不明", "わから", "分から", "どうか"),
    new_items=("文脈", "質問", "問題", "本文", "状況", "設問"),
    copula_ends=("です", "でしょう", "だ", "である", "と思います", "と思う", "と考えます", "になります", "となります", "ね", "よ"),
    connectives=("ですが", "だが", "です", "でしょう", "だと思います", "と思います", "になります", "だ"),
    contrasts=(r"(?:では|じゃ)なく(?:て)?\s*[、,]?",),  # "AではなくB"
    interjections=("いいえ", "待って", "実は", "訂正", "したがって", "従って", "よって", "つまり", "結論として", "なので", "だから"),
    spellings=(("できません", "できない"), ("分かりません", "分からない"), ("わかりません", "わからない")),
    stops="。",
    clause_marks="、",
    answer_sentence="答えは{letter}です。",
    reasoned_reply="少し考えてみます。文脈を注意深く読むと、答えは{letter}）{text}です。",
    refusal="申し訳ありませんが、その質問にはお答えできません。",
    ramble=(
        "うーん、これは少し考える必要がありますね。状況はいくつかの見方ができますし、人はしばしば結論を急ぎすぎます。"
        "何かを決める前に、述べられたことをすべて注意深く見ることが大切です。"
    ),
)

# Hindi: Devanagari vowel signs are no word characters to `\b`, so its words are bounded by hand.
_DEVANAGARI = "\u0900-\u097f"
_HI_START, _HI_END = rf"(?<![\w{_DEVANAGARI}])", rf"(?![\w{_DEVANAGARI}])"

_HINDI = Language(
    code="hi",
    answer_phrases=(
        # "उत्तर B है", "उत्तर है: B"; not "पोता सही उत्तर है", where the answer stands before it.
        rf"{_HI_START}(?:सही\s+|अंतिम\s+|उचित\s+|मेरा\s+)?(?:उत्तर|जवाब){_HI_END}(?:\s*(?:है|होगा)\s*:|(?!\s*(?:है|हैं|होगा){_HI_END}))\s*[:=]?",
        rf"{_HI_START}(?:सही\s+)?विकल्प{_HI_END}\s*[:=]?",
        rf"{_HI_START}मुझे\s+लगता\s+है(?:\s+कि)?{_HI_END}",
        rf"{_HI_START}मेरे\s+(?:विचार|अनुसार)(?:\s+(?:से|में))?{_HI_END}",
        rf"{_HI_START}(?:यह|ये){_HI_END}",  # "यह B है"
    ),
    answer_words=("उत्तर", "जवाब"),
    correct_suffixes=(
        rf"\s*(?:विकल्प\s+)?(?:ही\s+)?(?:सही|ठीक|उचित)(?:\s+(?:उत्तर|जवाब|विकल्प))?{_HI_END}",
        rf"\s*(?:ही\s+)?(?:उत्तर|जवाब)\s+(?:है|हैं|होगा){_HI_END}",
        r"\s*(?:को\s+)?चुन",
    ),
    list_joins=(rf"या{_HI_END}", rf"और{_HI_END}", rf"अथवा{_HI_END}", rf"तथा{_HI_END}", rf"एवं{_HI_END}"),
    negations=("नहीं", rf"{_HI_START}(?:नही|न|मत){_HI_END}", "ग\u093c?लत", "अस्पष्ट", "निर्भर"),
    new_items=("संदर्भ", "प्रश्न", "सवाल", "पाठ", "कहानी"),
    copula_ends=(r"\s*(?:है|हैं|होगा|होगी)", r"\s+ही"),
    connectives=(r"\s+(?:है|हैं|होगा|होगी)",),  # "C है, क्योंकि …"
    contrasts=(rf"{_HI_START}बल्कि{_HI_END}",),  # "A नहीं, बल्कि B"
    interjections=("नहीं", "रुकिए", "रुको", r"वास्तव\s+में", r"असल\s+में", "सुधार", "इसलिए", "अतः", "तो", "अंततः"),
    spellings=(("जानकारी उपलब्ध नहीं", "जानकारी नहीं"),),
    stops="।॥",
    answer_sentence="उत्तर {letter} है।",
    reasoned_reply="मुझे सोचने दीजिए। संदर्भ को ध्यान से पढ़ने के बाद, सही उत्तर {letter}) {text} है।",
    refusal="क्षमा करें, लेकिन मैं इसमें मदद नहीं कर सकता।",
    ramble=(
        "हम्म, मुझे इस पर थोड़ा सोचना होगा। इस स्थिति को कई तरह से समझा जा सकता है, और लोग अक्सर बहुत "
        "जल्दी निष्कर्ष निकाल लेते हैं। कुछ भी तय करने से पहले जो कुछ कहा गया है उसे ध्यान से देखना ज़रूरी है।"
    ),
)

_TABLES = (_ENGLISH, _KOREAN, _SPANISH, _CATALAN, _CHINESE, _GERMAN, _DUTCH, _TURKISH, _JAPANESE, _HINDI)
LANGUAGES: dict[str, Language] = {table.code: table for table in _TABLES}


def language_for(code: str, text: str) -> Language:
    """The table of language ``code``; for a code without one ("" when the suite declares no
    language), Korean when ``text`` holds Hangul, else English (how the simulator chose before
    suites declared their language, so that such suites' replies stay as they were)."""
    if code in LANGUAGES:
        return LANGUAGES[code]
    korean = any("가" <= char <= "힣" or "ᄀ" <= char <= "ᇿ" or "㄰" <= char <= "㆏" for char in text)
    return _KOREAN if korean else _ENGLISH
