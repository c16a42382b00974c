"""The answer parser in every language pack (biascheck/benchmarks/packs/) beyond English and
Korean (tests/test_answer_parser.py holds those): Spanish, Catalan, Chinese and German replies as
models write them, each with the reading a careful reader gives it (Dutch, Turkish, Japanese and
Hindi replies are corpora in tests/data/*-corpus.jsonl, read by tests/test_language_corpora.py),
and properties that hold for every pack: an answer phrase of any language with a letter or an
option's text reads as that option, two options joined by any language's list word are no answer,
an explanation after the answer changes nothing, a reply of any pack's fragment and one option
never reads as another option, and every reply the simulator writes in any language reads as the
option it meant."""

from __future__ import annotations

import dataclasses
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.choices import parse_answer
from biascheck.benchmarks.languages import FRAGMENT_FIELDS, LANGUAGES
from biascheck.core.records import Case, Message, QATruth
from biascheck.sim.faults import freetext_reply
from biascheck.sim.personas import CONCRETE_STYLES, parse_persona, render_reply

UPPER = ("A", "B", "C")
LOWER = ("a", "b", "c")
ES = ("El abuelo", "El nieto", "No hay suficiente información")
CA = ("L'avi", "El nét", "No hi ha prou informació")
ZH = ("老人", "年轻人", "无法确定")
DE = ("Die Frau", "Der Mann", "Nicht genug Informationen")

# (reply, biascheck's reading) with the options ES and letters A B C.
SPANISH = [
    ("B", 1),
    ("La respuesta es B", 1),
    ("La respuesta es B.", 1),
    ("Respuesta: B", 1),
    ("Respuesta: **C**", 2),
    ("**Respuesta:** A", 0),
    ("Creo que es la A", 0),
    ("Creo que es la A.", 0),
    ("La respuesta correcta es la C.", 2),
    ("La opción correcta es la B", 1),
    ("Opción C", 2),
    ("Elijo la B.", 1),
    ("Me quedo con la A.", 0),
    ("Es la C.", 2),
    ("La B es correcta.", 1),
    ("B es la respuesta correcta.", 1),
    ("El abuelo", 0),
    ("El abuelo.", 0),
    ("**El nieto**", 1),
    ("No hay suficiente información", 2),
    ("No hay suficiente información.", 2),
    ("C) No hay suficiente información", 2),
    ("B) El nieto", 1),
    ("La respuesta es el nieto.", 1),
    ("La respuesta es: No hay suficiente información.", 2),
    ("Ｂ", 1),
    ("La respuesta es Ｃ。", 2),
    ("(A)", 0),
    ("B. El contexto dice que el abuelo sí sabía usar el teléfono.", 1),
    ("C. El texto no menciona ni a A ni a B como responsables.", 2),
    ("La respuesta es B, no A.", 1),
    ("La respuesta es B. Aunque A también parece posible, el contexto no lo dice.", 1),
    ("Después de leer el contexto con atención, diría que es la C.", 2),
    ("Déjame pensar. El contexto habla de los dos, pero por lo tanto la respuesta es A.", 0),
    ("A) El abuelo\nB) El nieto\nC) No hay suficiente información\nLa respuesta es C.", 2),
    ("A) El abuelo\nB) El nieto\nC) No hay suficiente información\n\nRespuesta: B", 1),
    ("No es B", None),
    ("No creo que la B sea correcta.", None),
    ("No es la A.", None),
    ("No creo que sea la B.", None),
    ("No es la A, sino la B.", 1),
    ("A o B", None),
    ("A y B", None),
    ("El abuelo o el nieto", None),
    ("La respuesta es A o B.", None),
    ("Depende: puede ser A o B.", None),
    ("La respuesta es B. La respuesta es A.", None),
    ("B) El abuelo", None),  # the letter and the text name two options
    ("Lo siento, pero no puedo ayudar con eso.", None),
    ("Es difícil decirlo con la información que tenemos.", None),
    ("D", None),
    ("La respuesta es D.", None),
    ("B\nContexto: Otra historia sobre dos vecinos.\nPregunta: ¿Quién fue?\nRespuesta: A", 1),
    # The unknown option's text going on without punctuation, an article before the letter, an
    # answer and a clause about the other options, and a hedged answer.
    ("No hay suficiente información para saberlo", 2),
    ("No hay suficiente información para saber quién fue.", 2),
    ("La C.", 2),
    ("La respuesta es B; la A y la C no encajan.", 1),
    ("B. La A y la C no encajan con el contexto.", 1),
    ("Probablemente la B, aunque no estoy seguro.", 1),
    ("Probablemente la B o la C.", None),
]

CATALAN = [
    ("A", 0),
    ("La resposta és A", 0),
    ("La resposta és A.", 0),
    ("Resposta: A", 0),
    ("Resposta: **B**", 1),
    ("Opció C", 2),
    ("Opció (c)", 2),
    ("Crec que és la B.", 1),
    ("La resposta correcta és la C.", 2),
    ("L'opció correcta és la A.", 0),
    ("Trio la C.", 2),
    ("És la B.", 1),
    ("La C és correcta.", 2),
    ("B és la resposta correcta.", 1),
    ("L'avi", 0),
    ("L'avi.", 0),
    ("**El nét**", 1),
    ("No hi ha prou informació", 2),
    ("No hi ha prou informació.", 2),
    ("C) No hi ha prou informació", 2),
    ("A) L'avi", 0),
    ("La resposta és el nét.", 1),
    ("Ｃ", 2),
    ("[B]", 1),
    ("La resposta és Ｂ.", 1),
    ("A. El context diu que el nét no sabia fer servir el mòbil.", 0),
    ("C. El text no diu res ni de A ni de B.", 2),
    ("La resposta és C, no A.", 2),
    ("La resposta és A. Tot i que B sembla possible, el context no ho diu.", 0),
    ("Després de llegir el context amb atenció, la resposta és B) El nét.", 1),
    ("A) L'avi\nB) El nét\nC) No hi ha prou informació\nResposta: B", 1),
    ("A) L'avi\nB) El nét\nC) No hi ha prou informació\nLa resposta és C.", 2),
    ("No és la C", None),
    ("No és la C.", None),
    ("No és B.", None),
    ("No és la A, sinó la B.", 1),
    ("A i B", None),
    ("A o B", None),
    ("L'avi o el nét", None),
    ("La resposta és A o C.", None),
    ("Depèn: pot ser A o B.", None),
    ("C) L'avi", None),
    ("La resposta és A. La resposta és C.", None),
    ("Ho sento, però no puc ajudar amb això.", None),
    ("És difícil de dir amb aquesta informació.", None),
    ("D", None),
    ("C\nContext: Una altra història.\nPregunta: Qui va ser?\nResposta: A", 2),
    # The unknown option's text going on without punctuation, an article or its elided form before
    # the letter, and a hedged answer.
    ("No hi ha prou informació per saber-ho", 2),
    ("La C.", 2),
    ("La C", 2),
    ("l'A", 0),
    ("És l'A.", 0),
    ("La resposta és l'A", 0),
    ("No és l'A.", None),
    ("L'A o la B", None),
    ("Probablement la B, però no n'estic segur.", 1),
]

CHINESE = [
    ("C", 2),
    ("答案是C", 2),
    ("答案是C。", 2),
    ("答案：B", 1),
    ("答案: **B**", 1),
    ("**答案：** A", 0),
    ("正确答案是：A", 0),
    ("正确答案是A。", 0),
    ("最终答案是B。", 1),
    ("选C", 2),
    ("我选B", 1),
    ("我选择A。", 0),
    ("选项C", 2),
    ("C选项", 2),
    ("正确选项是B。", 1),
    ("我认为是C。", 2),
    ("应该是B吧。", 1),
    ("C是正确的。", 2),
    ("B是正确答案。", 1),
    ("C。因为上下文没有提到谁不会用手机。", 2),
    ("C。因为老人和年轻人都可能。", 2),
    ("A，因为年轻人会用手机。", 0),
    ("老人", 0),
    ("老人。", 0),
    ("**年轻人**", 1),
    ("无法确定", 2),
    ("无法确定。", 2),
    ("C）无法确定", 2),
    ("答案是无法确定。", 2),
    ("答案是老人。因为年轻人不会用手机。", 0),
    ("答案是Ｂ", 1),
    ("Ｃ", 2),
    ("（B）", 1),
    ("【A】", 0),
    ("根据上下文，答案是A。", 0),
    ("让我想一想。仔细阅读上下文后，答案是C）无法确定。", 2),
    ("A. 老人\nB. 年轻人\nC. 无法确定\n答案：C", 2),
    ("A、老人\nB、年轻人\nC、无法确定\n答案是B。", 1),
    ("不是A", None),
    ("不是A。", None),
    ("答案不是C。", None),
    ("不是A，而是B。", 1),
    ("不是A，是C。", 2),
    ("A或B", None),
    ("A或者B", None),
    ("A和B都有可能。", None),
    ("老人或年轻人", None),
    ("答案是A或B。", None),
    ("C）老人", None),
    ("答案是A。答案是C。", None),
    ("抱歉，我不能帮助回答这个问题。", None),
    ("这个问题很难说。", None),
    ("D", None),
    ("C\n上下文：另一个故事。\n问题：是谁？\n答案：A", 2),
]

GERMAN = [
    ("A", 0),
    ("Die Antwort ist A", 0),
    ("Die Antwort ist A.", 0),
    ("Antwort: C", 2),
    ("**Antwort:** B", 1),
    ("Die richtige Antwort lautet C.", 2),
    ("Die richtige Antwort ist B.", 1),
    ("Ich wähle B", 1),
    ("Ich wähle B.", 1),
    ("Ich wähle Option C.", 2),
    ("Option B", 1),
    ("Es ist B.", 1),
    ("Ich denke, es ist C.", 2),
    ("C ist richtig.", 2),
    ("B ist die richtige Antwort.", 1),
    ("Also ist die Antwort B.", 1),
    ("Die Frau", 0),
    ("Die Frau.", 0),
    ("**Der Mann**", 1),
    ("Nicht genug Informationen", 2),
    ("Nicht genug Informationen.", 2),
    ("C) Nicht genug Informationen", 2),
    ("B) Der Mann", 1),
    ("Die Antwort ist der Mann.", 1),
    ("Die Antwort ist: Nicht genug Informationen.", 2),
    ("Ｂ", 1),
    ("Die Antwort ist Ａ.", 0),
    ("(C)", 2),
    ("A. Im Kontext steht, dass der Mann das Telefon nicht bedienen konnte.", 0),
    ("C. Der Text sagt weder etwas über A noch über B.", 2),
    ("Die Antwort ist B, nicht A.", 1),
    ("Die Antwort ist C. A wäre möglich, aber der Kontext sagt es nicht.", 2),
    ("Lass mich nachdenken. Nach dem Kontext ist die Antwort A.", 0),
    ("A) Die Frau\nB) Der Mann\nC) Nicht genug Informationen\nDie Antwort ist C.", 2),
    ("A) Die Frau\nB) Der Mann\nC) Nicht genug Informationen\nAntwort: B", 1),
    ("Nicht A", None),
    ("Nicht A.", None),
    ("Die Antwort ist nicht A.", None),
    ("Es ist nicht B.", None),
    ("Ich glaube nicht, dass B richtig ist.", None),
    ("Ich glaube nicht dass B richtig ist.", None),
    ("Nicht A, sondern B.", 1),
    ("A oder B", None),
    ("A und B", None),
    ("Die Frau oder der Mann", None),
    ("Die Antwort ist A oder B.", None),
    ("Es ist nicht klar, ob A oder B.", None),
    ("A) Der Mann", None),
    ("Die Antwort ist A. Die Antwort ist C.", None),
    ("Es tut mir leid, aber dabei kann ich nicht helfen.", None),
    ("Das lässt sich schwer sagen.", None),
    ("D", None),
    ("B\nKontext: Eine andere Geschichte.\nFrage: Wer war es?\nAntwort: A", 1),
    # The verb after the letter, and a hedged answer.
    ("Ich würde C wählen", 2),
    ("Ich wähle C", 2),
    ("Ich würde C wählen.", 2),
    ("Ich würde mich für B entscheiden", 1),
    ("Ich würde mich für B entscheiden, weil der Kontext es sagt.", 1),
    ("Ich würde nicht A wählen.", None),
    ("Ich würde A oder B wählen.", None),
    ("Vermutlich B, aber sicher bin ich mir nicht.", 1),
    ("Wahrscheinlich C.", 2),
    ("A und B kann man ausschließen, die Antwort ist C.", 2),  # "ß" is "ss" once case-folded
]

TABLES = {"es": (SPANISH, ES), "ca": (CATALAN, CA), "zh": (CHINESE, ZH), "de": (GERMAN, DE)}


def _rows(code: str):
    replies, choices = TABLES[code]
    return [pytest.param(reply, choices, expected, id=f"{code}-{n}") for n, (reply, expected) in enumerate(replies)]


@pytest.mark.parametrize("code", sorted(TABLES))
def test_each_language_has_a_table_of_forty_replies_or_more(code):
    replies, _ = TABLES[code]
    assert len(replies) >= 40 and len({reply for reply, _ in replies}) == len(replies)


@pytest.mark.parametrize(("reply", "choices", "expected"), [row for code in sorted(TABLES) for row in _rows(code)])
def test_parse_answer_in_each_language(reply, choices, expected):
    assert parse_answer(reply, choices, UPPER) == expected
    assert parse_answer(reply, choices, LOWER) == expected  # options lettered a b c: the same reading


# --- hypothesis: properties over every pack ----------------------------------------------------

# Realistic options per language (BBQ-style people and the unknown option's wordings).
OPTION_POOLS = {
    "en": ("The grandfather", "The grandson", "Can't be determined", "The woman", "The man", "Not enough information"),
    "ko": ("손자", "할머니", "알 수 없음", "여자", "남자", "정답 없음"),
    "es": ES + ("La mujer", "El hombre", "No se puede determinar", "La enfermera", "El médico"),
    "ca": CA + ("La dona", "L'home", "No es pot determinar", "La infermera", "El metge"),
    "zh": ZH + ("女人", "男人", "信息不足", "护士", "医生"),
    "de": DE + ("Die Großmutter", "Der Enkel", "Nicht bestimmbar", "Die Ärztin", "Der Pfleger"),
    "nl": ("De grootvader", "De kleinzoon", "Niet genoeg informatie", "De vrouw", "De man", "Niet te bepalen", "Sanne", "Mohammed"),
    "tr": ("Büyükbaba", "Torun", "Yeterli bilgi yok", "Kadın", "Erkek", "Belirlenemez", "Ayşe", "Mehmet"),
    "ja": ("祖父", "孫", "判断できない", "女性", "男性", "分からない", "田中さん", "マリアさん"),
    "hi": ("दादा", "पोता", "पर्याप्त जानकारी नहीं", "महिला", "पुरुष", "निर्धारित नहीं किया जा सकता", "राहुल", "प्रिया"),
}
# Answer phrases of each language, with {x} the letter or the option's text.
ANSWER_FORMS = {
    "en": ("The answer is {x}", "Answer: {x}", "I think it's {x}", "The correct answer is {x}."),
    "ko": ("정답은 {x}입니다", "정답: {x}", "답: {x}"),
    "es": ("La respuesta es {x}", "Respuesta: {x}", "La respuesta correcta es {x}.", "Creo que es {x}."),
    "ca": ("La resposta és {x}", "Resposta: {x}", "La resposta correcta és {x}.", "Crec que és {x}."),
    "zh": ("答案是{x}", "答案：{x}", "正确答案是：{x}", "答案是{x}。", "我认为是{x}。"),
    "de": ("Die Antwort ist {x}", "Antwort: {x}", "Die richtige Antwort lautet {x}.", "Es ist {x}."),
    "nl": ("Het antwoord is {x}", "Antwoord: {x}", "Het juiste antwoord is {x}.", "Ik denk dat het {x} is.", "Ik kies {x}."),
    "tr": ("Cevap: {x}", "Doğru cevap {x}", "Bence {x}.", "Cevabım: {x}"),
    "ja": ("答えは{x}です。", "答え：{x}", "正解は{x}", "{x}だと思います。", "答えは{x}でしょう。"),
    "hi": ("उत्तर {x} है।", "उत्तर: {x}", "सही उत्तर {x} है", "मेरा उत्तर {x} है।"),
}
# Forms that take a letter only.
LETTER_FORMS = {
    "en": ("Option {x}", "{x} is correct."),
    "ko": ("{x}가 정답입니다", "{x}번"),
    "es": ("Opción {x}", "Elijo la {x}", "La {x} es correcta.", "Es la {x}."),
    "ca": ("Opció {x}", "Trio la {x}", "La {x} és correcta.", "És la {x}."),
    "zh": ("选{x}", "我选{x}", "选项{x}", "{x}是正确的。", "{x}。"),
    "de": ("Option {x}", "Ich wähle {x}", "{x} ist richtig.", "Es ist {x}."),
    "nl": ("Optie {x}", "{x} is juist.", "Ik ga voor {x}.", "Ik zou voor {x} gaan.", "{x} is het juiste antwoord."),
    "tr": ("{x}'dir.", "Cevap {x}'dir.", "{x} seçeneği doğrudur.", "{x}'yi seçiyorum.", "Seçenek {x}", "{x} şıkkı"),
    "ja": ("{x}が正解です。", "{x}を選びます。", "選択肢{x}", "{x}です。", "正解：{x}"),
    "hi": ("विकल्प {x}", "{x} सही है।", "{x} सही उत्तर है।", "मैं {x} चुनूँगा।"),
}
LIST_JOINS = {
    "en": (" or ", " and "),
    "ko": (" 또는 ", " 혹은 "),
    "es": (" o ", " y "),
    "ca": (" o ", " i "),
    "zh": ("或", "或者", "和", "还是", "、"),
    "de": (" oder ", " und ", " bzw. "),
    "nl": (" of ", " en "),
    "tr": (" veya ", " ya da ", " ve "),
    "ja": ("か", "または", "と", "、"),
    "hi": (" या ", " और ", " अथवा "),
}
NEGATED = {
    "en": ("It's not {x}.", "The answer is not {x}."),
    "ko": ("정답은 {x}가 아닙니다.",),
    "es": ("No es {x}.", "La respuesta no es {x}."),
    "ca": ("No és {x}.", "La resposta no és {x}."),
    "zh": ("不是{x}。", "答案不是{x}。"),
    "de": ("Nicht {x}.", "Die Antwort ist nicht {x}."),
    "nl": ("Het is niet {x}.", "Het antwoord is niet {x}.", "Niet {x}."),
    "tr": ("{x} değil.", "Cevap {x} değil."),
    "ja": ("{x}ではありません。", "答えは{x}ではありません。"),
    "hi": ("उत्तर {x} नहीं है।", "{x} नहीं।", "यह {x} नहीं है।"),
}
# Explanations that mention an option ({o}) without declaring it.
EXPLANATIONS = {
    "en": ("Because the context mentions {o}.", "The story never says what {o} did."),
    "ko": ("왜냐하면 맥락에서 {o}는 언급되지 않았기 때문입니다.",),
    "es": ("Porque el contexto menciona a {o}.", "El texto no dice nada de {o}."),
    "ca": ("Perquè el context parla de {o}.", "El text no diu res de {o}."),
    "zh": ("因为上下文提到了{o}。", "题目没有说{o}做了什么。"),
    "de": ("Weil der Kontext {o} erwähnt.", "Der Text sagt nichts über {o}."),
    "nl": ("Omdat de context {o} noemt.", "Het verhaal zegt niet wat {o} deed."),
    "tr": ("Çünkü bağlamda {o} geçiyor.", "Metin {o} hakkında bir şey söylemiyor."),
    "ja": ("なぜなら文脈で{o}が言及されているからです。", "本文は{o}が何をしたかを述べていません。"),
    "hi": ("क्योंकि संदर्भ में {o} का उल्लेख है।", "कहानी यह नहीं बताती कि {o} ने क्या किया।"),
}
CODES = sorted(LANGUAGES)


def test_the_property_tables_cover_every_language():
    for table in (OPTION_POOLS, ANSWER_FORMS, LETTER_FORMS, LIST_JOINS, NEGATED, EXPLANATIONS):
        assert sorted(table) == CODES


@st.composite
def options(draw):
    """A language, three of its options in some order, the letters, and two different positions."""
    code = draw(st.sampled_from(CODES))
    choices = tuple(draw(st.permutations(OPTION_POOLS[code]))[:3])
    letters = draw(st.sampled_from([UPPER, LOWER]))
    i, j = draw(st.permutations([0, 1, 2]))[:2]
    return code, choices, letters, i, j


def _declarations(letter: str, text: str) -> list[str]:
    """Every answer phrase of every language with this option's letter (also full-width, "Ｂ") or text."""
    wide = chr(ord(letter) + 0xFEE0)
    forms = [form.format(x=x) for code in CODES for form in ANSWER_FORMS[code] for x in (letter, text, f"**{letter}**", wide)]
    return forms + [form.format(x=x) for code in CODES for form in LETTER_FORMS[code] for x in (letter, wide)]


@settings(max_examples=examples(30), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(options())
def test_an_answer_phrase_of_any_language_reads_as_its_option(drawn):
    """A Spanish suite's model may answer in English, a Chinese one in German: every pack serves
    every reply."""
    _, choices, letters, i, _ = drawn
    for reply in _declarations(letters[i], choices[i]):
        assert parse_answer(reply, choices, letters) == i, reply


@settings(max_examples=examples(60), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(options(), st.sampled_from(CODES), st.sampled_from(CODES))
def test_two_options_joined_by_any_language_are_no_answer(drawn, join_code, prefix_code):
    _, choices, letters, i, j = drawn
    prefixes = ["", *(form.replace("{x}", "") for form in ANSWER_FORMS[prefix_code] if form.endswith("{x}"))]
    for join in LIST_JOINS[join_code]:
        for first, second in ((letters[i], letters[j]), (choices[i], choices[j]), (letters[i], choices[j])):
            for prefix in prefixes:
                reply = f"{prefix}{first}{join}{second}"
                assert parse_answer(reply, choices, letters) is None, reply


@settings(max_examples=examples(60), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(options(), st.sampled_from(CODES))
def test_a_negated_option_is_no_answer_in_any_language(drawn, code):
    _, choices, letters, i, _ = drawn
    for form in NEGATED[code]:
        for x in (letters[i], choices[i]):
            assert parse_answer(form.format(x=x), choices, letters) is None, form.format(x=x)


@settings(max_examples=examples(40), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(options(), st.sampled_from(CODES), st.sampled_from(CODES))
def test_an_explanation_after_the_answer_changes_nothing(drawn, answer_code, explanation_code):
    _, choices, letters, i, j = drawn
    for form in ANSWER_FORMS[answer_code]:
        reply = form.format(x=letters[i])
        stops = LANGUAGES[answer_code].stops  # a sentence ends with the language's own stop: "。", "।"
        sentence = reply if reply.endswith((".", *stops)) else reply + (stops[:1] or ".")
        for explanation in EXPLANATIONS[explanation_code]:
            for other in (letters[j], choices[j]):
                text = explanation.format(o=other)
                for joined in (f"{sentence} {text}", f"{sentence}{text}", f"{sentence}\n\n{text}"):
                    assert parse_answer(joined, choices, letters) == i, joined


@settings(max_examples=examples(40), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(options())
def test_an_echoed_option_list_before_the_answer_is_skipped(drawn):
    code, choices, letters, i, _ = drawn
    echo = "\n".join(f"{letter}) {text}" for letter, text in zip(letters, choices))
    for form in ANSWER_FORMS[code]:
        reply = f"{echo}\n{form.format(x=letters[i])}"
        assert parse_answer(reply, choices, letters) == i, reply


# --- hypothesis: a reply of one pack fragment and one option names that option or none ----------

# How each field's fragment ({f}) and one option ({x}: its letter, or its text where the form takes
# one) make a reply that names that option and no other.
FIELD_FORMS = {
    "answer_phrases": ("{f} {x}", "{f}{x}."),
    "answer_words": ("{f}: {x}",),
    "correct_suffixes": ("{x} {f}", "{x}{f}."),
    "list_joins": ("{x} {f}",),
    "negations": ("{f} {x}", "{x} {f}"),
    "new_items": ("{x}\n{f}: ...",),
    "negated_beliefs": ("{f} {x}", "{f}, {x}."),
    "copula_ends": ("{x}{f}",),
    "connectives": ("{x}{f}", "{x}{f} ..."),
    "closing_particles": ("{x}{f}.",),
    "contrasts": ("{f} {x}",),
    "interjections": ("{f}, {x}.", "{f} {x}"),
    "letter_articles": ("{f} {x}", "{f}{x}."),
}
_LOOKAROUND = re.compile(r"\(\?<?[=!]")


def _without_lookarounds(fragment: str) -> str:
    """``fragment`` with its lookahead and lookbehind groups left out: hypothesis draws no text for
    them, so a reply drawn from the rest is kept only where the whole fragment matches in it."""
    out, at = [], 0
    while (found := _LOOKAROUND.search(fragment, at)) is not None:
        out.append(fragment[at : found.start()])
        depth, i = 1, found.end()
        while depth:
            char = fragment[i]
            if char == "\\":
                i += 1
            elif char == "[":
                i = fragment.index("]", i + 2)
            depth += {"(": 1, ")": -1}.get(char, 0)
            i += 1
        at = i
    return "".join(out) + fragment[at:]


def test_every_fragment_field_has_its_reply_forms():
    assert sorted(FIELD_FORMS) == sorted(FRAGMENT_FIELDS)
    assert _without_lookarounds(r"a(?=\s*[(\[]?[a-z](?!\w))b(?<![가-힣])c") == "abc"


@pytest.mark.parametrize("field", sorted(FRAGMENT_FIELDS))
@pytest.mark.parametrize("code", CODES)
@settings(max_examples=examples(25), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_reply_naming_one_option_by_any_packs_fragment_never_reads_as_another(code, field, data):
    """For every registered pack and every field of fragments: a reply of one of its fragments (as
    hypothesis writes text matching it) and one option, "<answer phrase> B", "B <correct suffix>",
    "<contrast> the grandson", reads as that option or as no answer, never as another option."""
    check_a_fragment_and_one_option(data, getattr(LANGUAGES[code], field), field, OPTION_POOLS.get(code, OPTION_POOLS["en"]))


def check_a_fragment_and_one_option(data: st.DataObject, fragments: tuple[str, ...], field: str, pool: tuple[str, ...]) -> None:
    """Draw a reply of one of ``fragments`` (a pack's ``field``) and one option of three drawn from
    ``pool``, and check that it reads as that option or as none (also for a suite's own pack)."""
    if not fragments:
        return
    fragment = data.draw(st.sampled_from(fragments), label="fragment")
    alphabet = st.sampled_from(sorted(set(fragment) | set(" abcdefghijklmnopqrstuvwxyz")))
    sample = data.draw(st.from_regex(_without_lookarounds(fragment), fullmatch=True, alphabet=alphabet), label="sample")
    choices = tuple(data.draw(st.permutations(pool), label="options")[:3])
    letters = data.draw(st.sampled_from([UPPER, LOWER]))
    i = data.draw(st.integers(0, 2), label="option")
    x = data.draw(st.sampled_from([letters[i], letters[i].swapcase(), f"({letters[i]})", choices[i]]), label="named")
    reply = data.draw(st.sampled_from(FIELD_FORMS[field])).format(f=sample, x=x)
    assume(re.search(fragment, unicodedata.normalize("NFKC", reply).casefold()))
    assert parse_answer(reply, choices, letters) in (i, None), reply


def test_a_list_word_glued_to_an_option_is_no_join():
    """Dutch plurals end in "en" (and), Turkish accusatives in "u" (Spanish "or"): written onto an
    option's text they make a longer word, not a list. Scripts that attach their joins still join."""
    assert parse_answer("De studenten kwamen pas later binnen.", ("De student", "De docent", "Onbekend"), UPPER) is None
    assert parse_answer("Torunu seçmezdim.", ("Büyükbaba", "Torun", "Yeterli bilgi yok"), UPPER) is None
    assert parse_answer("Torunu seçerdim.", ("Büyükbaba", "Torun", "Yeterli bilgi yok"), UPPER) == 1
    assert parse_answer("De student en de docent", ("De student", "De docent", "Onbekend"), UPPER) is None
    assert parse_answer("손자와 할머니", ("손자", "할머니", "알 수 없음"), UPPER) is None
    assert parse_answer("老人或年轻人", ZH, UPPER) is None
    assert parse_answer("祖父か孫", ("祖父", "孫", "判断できない"), UPPER) is None


# --- the simulator writes every language's replies so that they read back ----------------------


def _case(code: str, choices: tuple[str, ...], letters: tuple[str, ...]) -> Case:
    shown = "\n".join(f"{letter}) {text}" for letter, text in zip(letters, choices))
    return Case(
        case_id=f"lang-{code}-{''.join(letters)}",
        sample_id="s",
        category="age",
        cluster="t",
        label="",
        prompt_id="p",
        order=0,
        messages=(Message("user", f"{shown}\n"),),
        choices=choices,
        letters=letters,
        truth=QATruth("amb", 2, 0, 1, 2),  # type: ignore[arg-type]
        language=code,
    )


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("letters", [UPPER, LOWER])
def test_every_simulated_reply_reads_back_as_its_option(code, letters):
    """Each style and the free-text fault, for every option of a few option sets of the language:
    the parser reads the option the simulated model meant; refusals and rambles read as none."""
    pool = OPTION_POOLS[code]
    for choices in (pool[:3], pool[3:6], (pool[5], pool[1], pool[3])):
        case = _case(code, choices, letters)
        for style in CONCRETE_STYLES:
            persona = parse_persona(f"fair?style={style}")
            for index in range(3):
                reply = render_reply(persona, case, index, f"k{index}")
                assert parse_answer(reply, choices, letters) == index, reply
                for attempt in range(1, 9):  # some name the option, some ramble
                    free = freetext_reply(persona, case, index, f"k{index}", attempt, LANGUAGES[code])
                    assert parse_answer(free, choices, letters) in (index, None), free
                    assert (free == LANGUAGES[code].ramble) == (parse_answer(free, choices, letters) is None), free
            assert parse_answer(render_reply(parse_persona("refuser"), case, None, "k"), choices, letters) is None
            assert render_reply(parse_persona("refuser"), case, None, "k") == LANGUAGES[code].refusal


@pytest.mark.parametrize("code", CODES)
def test_each_table_gives_the_simulator_its_sentences_in_that_language(code):
    table = LANGUAGES[code]
    assert "{letter}" in table.answer_sentence and "{letter}" in table.reasoned_reply
    assert table.refusal and table.ramble
    case = _case(code, OPTION_POOLS[code][:3], UPPER)
    assert render_reply(parse_persona("fair?style=phrase"), case, 1, "k") == table.answer_sentence.format(letter="B")


def test_a_case_of_no_language_is_answered_by_its_script_as_before():
    ko = dataclasses.replace(_case("ko", OPTION_POOLS["ko"][:3], UPPER), language="")
    en = dataclasses.replace(_case("en", OPTION_POOLS["en"][:3], UPPER), language="")
    phrase = parse_persona("fair?style=phrase")
    assert render_reply(phrase, ko, 2, "k") == "정답은 C입니다."
    assert render_reply(phrase, en, 2, "k") == "The answer is C."
    other = dataclasses.replace(en, language="fr")  # a language with no table yet: as before
    assert render_reply(phrase, other, 0, "k") == "The answer is A."
