"""Secret and personal-identifier redaction, run on every turn at ingest before anything is stored.

Only the fact that a secret existed survives (as a `[REDACTED:kind]` marker); the value never does.
The detectors are shape-based and conservative about ordinary numbers: versions, years, prices, order and
tracking numbers inside normal text are left alone unless they are clearly card, ID or phone shaped, or a
label names them (a card number, a passport number, a phone number).

This runs on the API's request thread for caller-controlled text, so every detector must run in time
linear in the input. The unbounded patterns run on RE2 (`re2`, google-re2), which guarantees that; RE2
has no look-around, so "not preceded/followed by" conditions are checked in Python on the neighbouring
character, and a required-but-kept suffix (the `@` of a URL credential) is consumed and put back.
A few patterns stay on Python's `re` because every repetition in them is bounded (a card number is at
most 19 digits, an IBAN 34 characters), so each start position costs a constant: `_CARD_RE`, `_IBAN_RE` and the
card's group checks, and `MARKER_RE`, which has no
backtracking to do (a literal prefix, then one character class that cannot contain its terminator).

Known differences from the earlier backtracking patterns, all at odd edges:
- `\\b`, `\\d` are ASCII in RE2: a key glued to a CJK character ("密钥sk-...") is now caught, and a
  national ID must be written in ASCII digits (its first digit already had to be).
- IDs and card numbers are matched before the password cues, so a card-shaped password is reported
  as `card_number` (still redacted), and "密码是 4539 1488 ..." no longer leaks all but the first group.
- Lone UTF-16 surrogates (which UTF-8 cannot hold, so PostgreSQL could not store them either) are
  replaced with U+FFFD: matching runs on the UTF-8 bytes of the text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import re2  # google-re2: linear-time matching, no backtracking

# RE2's `\s` is ASCII only; Python's also covers \v, \x1c-\x1f, \x85 and the Unicode separators
# (NBSP, ideographic space U+3000, ...). Spelled out so a secret never runs on across such a space.
_WS = r"\s\p{Z}\x{0b}\x{1c}-\x{1f}\x{85}"
_SP = "[" + _WS + "]*"


@dataclass(frozen=True)
class Redaction:
    text: str
    kinds: list[str] = field(default_factory=list)

    @property
    def redacted(self) -> bool:
        return bool(self.kinds)


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# Applied to already-redacted text; linear on Python's `re` (see the module docstring), and it must accept
# any str the callers hand it, which RE2 (UTF-8 only) would not for a lone surrogate.
MARKER_RE = re.compile(r"\[REDACTED:([a-z_]+)\]")

_PRIVATE_KEY_RE = re2.compile(
    r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)"
)
_JWT_RE = re2.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
# Vendor key shapes. Ordered: the more specific prefix wins.
_API_KEY_PATTERNS: list[tuple[str, Any]] = [
    ("api_key", re2.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}")),
    ("api_key", re2.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{12,}")),
    ("api_key", re2.compile(r"\bwhsec_[A-Za-z0-9]{16,}")),
    (
        "github_token",
        re2.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ),
    ("aws_key", re2.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack_token", re2.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re2.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    ("api_key", re2.compile(r"\bLTAI[0-9A-Za-z]{12,}")),  # Alibaba Cloud AccessKey id
    ("api_key", re2.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}")),
    ("api_key", re2.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("api_key", re2.compile(r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}")),  # SendGrid
    ("token", re2.compile(r"\bya29\.[A-Za-z0-9_\-]{20,}")),  # Google OAuth access token
]
# Each pattern below that redacts only part of its match captures that part as its one group, "secret"
# (`_sub` hands the callback the group's span; named groups cost a lookup per match in the re2 wrapper).
# Credentials inside URLs: scheme://user:password@host. The `@` is consumed (no look-ahead in RE2) and
# kept by the replacement; the password class excludes `@`, so it ends at the first `@` either way.
_URL_CRED_RE = re2.compile(r"(?i)(?:\b[a-z][a-z0-9+.\-]*://[^" + _WS + r":/@'\"]*:)(?P<secret>[^" + _WS + r"@'\"]+)@")
# key=value / key: value where the key names a secret (env files, configs, headers).
_ASSIGN_RE = re2.compile(
    r"(?i)(?:\b[A-Za-z0-9_.\-]*(?:secret|token|passwd|password|pwd|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|auth|credential)[A-Za-z0-9_.\-]*" + _SP + r"[=:]" + _SP + r"[\"']?)"
    r"(?P<secret>[^" + _WS + r"\"',;]{6,})"
)

# Passwords in prose. Two strengths of cue:
# strong, an explicit "is/=/:/是" after the keyword: 密码是 xxx / password is xxx / pw: xxx / PIN 是 1234, and
#   "password for|to|of|on <up to four words> is|: xxx" (the router's, the bank account's);
# weak, only a comma or a space: "my gmail password, xxx" / "wifi password xxx" / 银行卡密码 xxx / wifi密码xxx,
#   and a login given as a pair ("login is admin / xxx", "creds: admin/xxx", "账号密码 admin / xxx"). A weak
#   cue redacts only a value shaped like a credential (see `_credential_shaped`), never a plain word
#   ("password manager"; "reset my password 3 times" is too short), and its value has no ":" or "/" so a link
#   ("重置密码 https://...") is not taken for one.
_KW_EN = r"(?:password|passwd|passcode|passphrase|pw|pwd|pin)"
_KW_ZH = r"(?:密码|口令|密钥|验证码|pin码)"
# The filler is non-greedy so "password for the router is X is great" stops at the first "is".
_FOR_WHAT = r"(?:[" + _WS + r"]+(?:for|to|of|on)(?:[" + _WS + r"]+[A-Za-z0-9'’._-]+){1,4}?)?"
# `\b` on both sides: the "is" ending "this" ("password for this site") is no cue.
_STRONG_CUE = r"(?:\b(?:is|was)\b|[=:：是为])"
_PASSWORD_PROSE_RE = re2.compile(
    r"(?i)(?:" + _KW_ZH + r"(?:[0-9]{1,2}位|（[^）]{1,8}）|\([^)]{1,8}\))?" + _SP + r"(?:是|为|:|：|=)" + _SP + r"|"
    r"\b" + _KW_EN + _FOR_WHAT + _SP + _STRONG_CUE + _SP + r"[\"'“]?)"
    r"(?P<secret>[^" + _WS + r"\"'”，。,;；]{4,})"
)
_CREDENTIAL_CHARS = r"[!#$%&()*+\-.0-9<=>?@A-Z\[\]^_a-z{|}~]"
"""What a typed credential after a weak cue is made of: printable ASCII without quotes, commas, ":" or "/"."""
_WEAK_SECRET = r"(?P<secret>[A-Za-z0-9]" + _CREDENTIAL_CHARS + r"{3,})"
_PASSWORD_WEAK_RE = re2.compile(
    r"(?i)(?:\b(?:password|passwd|passcode|passphrase|pin)"
    + _SP
    + r"[,，]"
    + _SP
    + r"|\b(?:password|passwd|psswd|pswd|passcode|passphrase|pwd|pw|pin)[ \t]+"
    + r"|\b(?:password|passwd|passcode|passphrase|pin|pwd|pw)[ \t]+(?:to|into|as)[ \t]+[\"'“]?"
    + r"|\b(?:pass|psswd|pswd)(?:[ \t]+(?:is|was)[ \t]+|[ \t]*[:：=][ \t]*)"
    + r"|\b(?:wi-?fi|network|wpa2?|wireless|router)[ \t]+key[ \t]*[:：=]?[ \t]*"
    + r"|"
    + _KW_ZH
    + r"[ \t\x{3000}]*(?:(?:设置|设|改|换|重置)(?:成|为)了?[ \t\x{3000}]*)?)"
    + _WEAK_SECRET
)
# A password or PIN given in brackets after its name, or a few words after it: "parental PIN (4471)", "the password on
# the router's label (K7mQ92xT)", "密码（Lk2093mm）". A weak cue: "my password (again)" stays.
_BRACKETED_SECRET_RE = re2.compile(
    r"(?i)(?:\b(?:password|passwd|passcode|passphrase|pin|pwd)(?:[ \t]+[A-Za-z'’]+){0,4}?|" + _KW_ZH + r")"
    r"[ \t]*[(（][ \t]*(?P<secret>[A-Za-z0-9][!#$%&*+\-.0-9<=>?@A-Z^_a-z~]{3,39})[ \t]*[)）]"
)
# A login given as a pair, user then password: "login is admin / …", "the creds are root / …", "账号密码 admin / …".
# The user is one ASCII token and the two are split by a slash: Chinese runs its words together, and "账号粉丝有两万多，
# 2024年…" is no login. Applied after the keyword cues, so "login: bob / pass: …" loses its password to "pass:".
_LOGIN_PAIR_RE = re2.compile(
    r"(?i)(?:\b(?:login|log-in|creds|credentials|user(?:name)?)(?:[ \t]+(?:is|are)|[ \t]*[:：])?[ \t]+"
    + r"|(?:账号|帐号|用户名|登录名)(?:和?密码)?(?:是|为|[:：])?[ \t]*)[A-Za-z0-9_.@+\-]{1,40}[ \t]*/[ \t]*"
    + _WEAK_SECRET
)
# A note in brackets between a label and its value ("安全码（背面三位数）：615", "PIN (for the kids' tablet): 4471").
_NOTE = r"(?:[ \t]*(?:（[^）\n]{1,12}）|\([^)\n]{1,24}\)))?"
# Codes that open something: a door, gate or alarm code, a one-time or verification code, a card's security
# code (CVV, three digits), 门禁码 / 取件码. A weak cue, like the password's: the value goes only when it is shaped
# like a credential, so "the auth code flow" and "the code is in python" stay.
_ACCESS_CODE_RE = re2.compile(
    r"(?i)(?:\b(?:door|gate|alarm|garage|lock|safe|entry|access|building|locker|verification|one[- ]time|2fa|"
    r"auth(?:entication)?|otp|security|unlock|recovery|backup|confirmation|login|sign[- ]?in|[0-9]-digit)[ \t]+code"
    r"|\b(?:lock(?:box)?|padlock|locker|safe)[ \t]+(?:combo|combination)|\b(?:cvv2?|cvc2?|csc|cid|otp|keypad)\b"
    r"|门禁码|门禁卡?密码|取件码|开锁码|确认码|验证码|校验码|动态码|otp码|号码锁|密码锁|安全码"
    r"|背面[^，。,.!?！？]{0,8}?后三位|\b(?:invite|invitation)[ \t]+code|邀请码)"
    + _NOTE
    + r"(?:[ \t]+(?:for|to|of|on)(?:[ \t]+[A-Za-z'’]+){1,3}?)?(?:[ \t]+is|[ \t]*[:：=是为])?[ \t]*"
    r"(?P<secret>[0-9]{1,3}(?: [0-9]{1,3}){1,7}\b|#?[A-Za-z]{0,3}-?[0-9]" + _CREDENTIAL_CHARS + r"{1,})"
)
# A code said in an SMS's words: "G-582044 is your Google verification code", "您的验证码是" (the cue above),
# "G-739204 是您的 Google 验证码", "your Uber code: 3307". Between "your" and "code" only a capitalised name and a
# word that says what the code is for: "your zip code is 10001" stays.
_CODE_PURPOSE = r"(?i:(?:verification|login|security|one-time|confirmation|access|sign-in)[ \t]+)?"
"""The word an SMS puts before "code" to say what it is for (optional)."""
_SMS_CODE_RE = re2.compile(
    r"(?P<secret>\b(?:[A-Z]-)?[0-9]{4,8})[ \t]*(?:(?i:is your)|是您的|为您的|是你的)[ \t]*(?:[A-Z][A-Za-z]+[ \t]*)?"
    + _CODE_PURPOSE
    + r"(?i:code|验证码|确认码|动态码)"
)
# A code named after it ("they texted 5521 as the verification code") or put to its use ("use 481920 to sign in"; five
# digits or more there, so "use 2024 to …" stays a year).
_CODE_NAMED_AFTER_RE = re2.compile(
    r"(?P<secret>\b[0-9]{4,8})[ \t]+(?i:as|is)[ \t]+(?i:the|my|your|a)[ \t]+" + _CODE_PURPOSE + r"(?i:code)\b"
)
_CODE_USED_RE = re2.compile(
    r"\b(?i:use|enter|type|input)[ \t]+(?P<secret>[0-9]{5,8})[ \t]+(?i:to)[ \t]+"
    r"(?i:confirm|verify|log[ \t]?in|sign[ \t]?in|activate|unlock)\b"
)
# A one-time code a few words after its name, read off where it is shown: "the login code on my phone says
# 883 201", "身份验证器显示 550 812". Only the names of one-time codes, and only digits (six may be grouped 3 + 3).
_CODE_SHOWN_RE = re2.compile(
    r"(?:(?i:\b(?:2fa|otp|one[- ]time|verification|authenticator|authentication|auth|login|sign[- ]?in)[ \t]+code)"
    r"(?:[ \t]+[A-Za-z'’]+){1,4}?[ \t]+(?i:is|was|shows|says|reads)[ \t]*[:：]?"
    r"|(?:验证器|验证码|动态码)[^，。,.!?！？\n]{0,6}?(?:显示|是|为|[:：]))[ \t]*"
    r"(?P<secret>[0-9]{3}[ \t][0-9]{3}|[0-9]{4,8})\b"
)
_YOUR_CODE_RE = re2.compile(
    r"\b(?i:your)[ \t]+(?:[A-Z][A-Za-z]+[ \t]+)?" + _CODE_PURPOSE + r"(?i:code)"
    r"(?:[ \t]+is|[ \t]*[:：])[ \t]*(?P<secret>(?:[A-Z]-)?[0-9]{4,8})\b"
)
# A database login in Oracle's form, user/password@host ("scott/T1ger2024@//orahost:1521/ORCL"): the host is followed
# by a port or a path, so a mail address after a slash ("and/or@example.com") is none, and a port ends where its digits
# do, so an image pinned by digest ("library/python3@sha256:4a5b…") is none either.
_SLASH_LOGIN_RE = re2.compile(
    r"\b[A-Za-z0-9_.$\-]{1,30}/(?P<secret>[^" + _WS + r"/@'\"]{4,})@(?://)?[A-Za-z0-9][A-Za-z0-9.\-]*"
    r"(?::[0-9]+(?:[^0-9A-Za-z]|$)|/)"
)
# Go's MySQL DSN, user:password@tcp(host:port)/db ("app:AppPw_77@tcp(127.0.0.1:3306)/blog"): no scheme before it.
_GO_DSN_RE = re2.compile(r"\b[A-Za-z0-9_.\-]{1,40}:(?P<secret>[^" + _WS + r"@'\"/:]{1,})@(?:tcp|udp|unix)\(")
# India's PAN (tax ID) by its fixed shape: five letters, the fourth the holder's kind (P person, C company, …), four
# digits, a letter ("ABKPT4821L"). A product code of that exact shape is rare.
_PAN_RE = re2.compile(r"\b[A-Z]{3}[PCHFATBLJG][A-Z][0-9]{4}[A-Z]\b")
# A wallet's recovery words after their name: twelve to twenty-four lower-case words.
_SEED_PHRASE_RE = re2.compile(
    r"(?i)(?:\b(?:seed|recovery|secret|backup|mnemonic)[ \t]+(?:phrase|words)|\bmnemonic|助记词)"
    r"(?:[ \t]+(?:is|are)|[ \t]*[:：=是为])?[ \t]*[\"'“‘]?"
    r"(?P<secret>[a-z]+(?:[ \t]+[a-z]+){11,23})"
)
_BEARER_RE = re2.compile(r"(?:\bBearer[" + _WS + r"]+)(?P<secret>[A-Za-z0-9._~+/=\-]{16,})")
# Chinese resident ID: 6-digit area, birth date 18xx-20xx, 3 digits, check digit/X. The character before
# is consumed (kept by the replacement) in place of a look-behind; the one after is checked in Python.
_CN_ID_RE = re2.compile(
    r"(?:^|[^0-9A-Za-z])"
    r"(?P<secret>[1-9][0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9Xx])"
)
# A number that its label names as an account or a personal identifier: "card number 4111 …" (whatever its
# checksum), "sort code 20-45-67", "SSN 123-45-6789", "passport no. E1234567", "IBAN GB29 NWBK …", "卡号 6222 …",
# "护照号 E1234…", "社保卡号 …". The label decides, not the shape: an order or phone number has no such label. "card"
# counts only with "number", "no." or "#" after it; "account", "routing" and "licence" count alone, because the value
# must follow at once (or after "is" / ":") and hold six digits ("my account is locked since 2024" stays).
_ID_CUE_EN = (
    r"(?i:\b(?:(?:card|account|acct|routing|licen[cs]e|national insurance|social security|social insurance|"
    r"tax(?:payer)?|tax file|nhs|ni|medicare|medical record|health card|insurance|member(?:ship)?|policy)"
    + _SP
    + r"(?:number|no\.?|num|#)|(?:iban|ssn|sin|passport|sort code|bsb|tin|social|acc|acct|ein|itin|utr|tfn|cpf"
    + r"|dl|driver'?s licen[cs]e|licen[cs]e|account|routing|aadhaar|nric|personnummer|bsn|steuer-?id|tax id"
    + r"|vat|gst|abn|uen|(?:unified )?social credit code"
    + r"|national id|id (?:number|no\.?))(?:"
    + _SP
    + r"(?:number|no\.?|num|#))?))"
)
_ID_CUE_ZH = (
    r"(?:银行卡|信用卡|储蓄卡|借记卡|卡|银行账户|账户|帐户|账号|帐号|护照|通行证|社保卡?|医保卡?|驾照|驾驶证|税号"
    r"|纳税人识别|身份证|营业执照(?:注册)?|(?:统一)?社会信用代码|组织机构代码)(?:档案)?(?:号码|编号|字号|号)?(?:（[^）]{0,8}）|\([^)]{0,8}\))?"
)
# What may stand between a label and its value: "is", ":" or "#", ", it's" ("Passport #, it's …"), 填 or 写
# ("护照号填 …").
_ID_CONNECTOR = (
    r"(?:(?i:is|was)" + _SP + r"|[:：=#是为]" + _SP + r"|(?:[#:：]?,)?" + _SP + r"(?i:it's|it is|its)" + _SP
    + r"|(?:填写?|写)(?:的是)?" + _SP + r")?"
)  # fmt: skip
# The value: groups of capitals and digits ("GB29 NWBK 6016", "20-45-67"), so a lower-case word ends it; the
# callback keeps only the groups up to the last one with a digit, and only when they hold six digits or more.
_LABELLED_ID_RE = re2.compile(
    r"(?:" + _ID_CUE_EN + "|" + _ID_CUE_ZH + r")" + _SP + _ID_CONNECTOR
    + r"(?P<secret>[A-Z0-9]+(?:[ \-.][A-Z0-9]+){0,8}(?:\([0-9A-Z]\))?)"
)  # fmt: skip
LABELLED_ID_MIN_DIGITS = 6
"""Digits a labelled identifier holds, unless it is one mixed group of eight characters or more with three digits
("C4RF72XN9", a passport's)."""

# Phone numbers are personal contact details: a memory that agents read back must not hand them out. Three
# shapes are specific enough on their own, and any run of digits a phone cue names is one too:
# - a mainland China mobile number (11 digits, 13x-19x, optionally +86 and grouped 3-4-4);
# - an international number written with its "+" and country code ("+44 7700 900123", "+1 (415) 555-0123");
# - a North American number grouped 3-3-4 with separators ("(415) 555-0123", "415-555-0123").
# The character before is consumed (kept by the replacement) in place of a look-behind; the one after and the
# count of digits are checked in Python. A bare run of digits without a cue (an order or tracking number) stays.
_PHONE_SEP = r"[ \-.]"
_CN_MOBILE_RE = re2.compile(
    r"(?:^|[^0-9A-Za-z+])(?P<secret>(?:(?:\+|00)86" + _PHONE_SEP + r"?)?1[3-9][0-9](?:" + _PHONE_SEP + r"?[0-9]{4}){2})"
)
_INTL_PHONE_RE = re2.compile(
    r"(?:^|[^0-9A-Za-z+])(?P<secret>\+[1-9][0-9]{0,3}(?:" + _PHONE_SEP + r"?\(?[0-9]{1,5}\)?){2,6})"
)
_NANP_PHONE_RE = re2.compile(
    r"(?:^|[^0-9A-Za-z])(?P<secret>(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[\-.])[2-9][0-9]{2}[\-.][0-9]{4})"
)
_PHONE_CUE_EN = (
    r"(?i:\b(?:(?:mobile|cell|cellphone|phone|telephone|tel|landline|whats ?app)(?:" + _SP + r"(?:number|no\.?|num|#))?"
    r"|(?:call|text|ring|reach|contact) me (?:at|on)))"
)
_PHONE_CUE_ZH = r"(?:手机号码|手机号|手机|电话号码|电话|联系电话|联系方式|座机|打我|打给我)"
_LABELLED_PHONE_RE = re2.compile(
    r"(?:" + _PHONE_CUE_EN + "|" + _PHONE_CUE_ZH + r")" + _SP + r"(?:(?i:is|was)" + _SP + r"|[:：=是为]" + _SP + r")?"
    r"(?P<secret>\+?\(?[0-9][0-9() \-.]{5,24}[0-9])"
)
PHONE_DIGITS = (7, 15)
"""How many digits a phone number holds (ITU E.164 allows at most 15; local numbers have at least 7)."""

# Bounded (at most 19 digits, single-character look-around): constant work per start, so linear on `re`.
_CARD_RE = re.compile(r"(?<![\d\-])(?:\d[ \-]?){12,18}\d(?![\d\-])")
# A maximal run of token characters; what may precede and follow it is checked by `token` in redact_secrets.
_DIGEST_LEAD_RE = re.compile(rb"(?i)(?<![a-z0-9])(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?)[:=]$")
_HEX_RE = re.compile(rb"[0-9a-fA-F]+")
_TOKEN_RE = re2.compile(r"[A-Za-z0-9_\-+/]{24,}={0,2}")
# Byte values, compared with `data[i]`: matching runs on UTF-8 bytes (see `_sub`).
_ASCII_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_TOKEN_NEIGHBOUR = _ASCII_ALNUM | frozenset(b"_-/")
_SNAKE_CASE_RE = re2.compile(r"[a-z]+(?:[_\-][a-z0-9]+)+")


# "the password is wrong" talks about a password without containing one.
_NOT_A_PASSWORD = frozenset(
    [
        "now",
        "required",
        "wrong",
        "incorrect",
        "correct",
        "changed",
        "the",
        "too",
        "still",
        "set",
        "stored",
        "saved",
        "fine",
        "same",
        "different",
        "expired",
        "reset",
        "not",
        "in",
        "on",
        "weak",
        "strong",
        "long",
        "short",
        "empty",
        "missing",
        "invalid",
        "valid",
        # Words that open a description of the password rather than the password itself.
        "also",
        "just",
        "only",
        "very",
        "really",
        "always",
        "never",
        "usually",
        "this",
        "that",
        "what",
        "here",
        "there",
        "your",
        "their",
        "mine",
        "yours",
        "easy",
        "hard",
        "simple",
        "secure",
        "insecure",
        "safe",
        "unsafe",
        "secret",
        "private",
        "public",
        "unknown",
        "case",
        "none",
        "null",
        "blank",
        "somewhere",
        "something",
        "written",
        "known",
        "shown",
        "hidden",
        "being",
        "broken",
        "stolen",
        "forgotten",
        "lost",
        "gone",
        "about",
        "from",
        "with",
        "without",
        "under",
        "behind",
        "inside",
    ]
)
# Participles and adverbs ("hashed", "expiring", "rarely") describe a password; as lowercase plain words
# they are prose, not values.
_PROSE_SUFFIXES = ("ed", "ing", "ly")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(token: str) -> bool:
    """A long token that mixes letters and digits with high entropy (keys, secrets), not a word or a path."""
    if len(token) < 24:
        return False
    classes = sum([any(c.islower() for c in token), any(c.isupper() for c in token), any(c.isdigit() for c in token)])
    if classes < 2 or not any(c.isdigit() for c in token):
        return False
    # snake_case / kebab-case identifiers are long but made of words ("dop_v1_<64 hex>" is not).
    if _SNAKE_CASE_RE.fullmatch(token) and max(len(part) for part in re.split(r"[_\-]", token)) < 20:
        return False
    return _entropy(token) >= 3.5


_CARD_GROUPS_RE = re.compile(r"\d{4}([ \-])\d{4}\1\d{4}\1\d{4}")
# An IBAN written bare ("NL63INGB0007811249", "GB29 NWBK 6016 1331 9268 19"): its mod-97 checksum decides, so a
# product code of the same shape stays. Bounded, one start per position (see `_CARD_RE`).
_IBAN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")


def _is_iban(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_MORE_GROUPS_RE = re.compile(r"[ \-]\d{4}[ \-]\d{2,}")
"""Two more groups after a card's four: a longer grouped number (a 22-digit tracking number), not a card followed
by its expiry ("12/27"), its CVV or a PIN."""
_CARD_CUE_RE = re.compile(
    r"(?i)(?:\bvisa|master ?card|\bamex|american express|\bdiscover|\bjcb|union ?pay|\bdiners|\bmaestro|\bcard"
    r"|卡号|信用卡|银行卡|储蓄卡|借记卡|银联)(?:[\s:：#=,，.\-]|number|num|no|is|was|details|号码|号|是|为){0,8}$"
)
"""A card named just before a number of 15 or 16 digits ("JCB 3519…", "card number: …", "信用卡号是 …"), with nothing
but a label word between: a card, whatever its checksum (a mistyped card number is still one)."""
CARD_MIN_DIGITS = 14
"""Digits of a card number found by its shape alone: 13-digit cards are long gone, and a 13-digit run that passes the
checksum is far likelier a barcode (EAN-13) or an ISBN."""


def _is_card(candidate: str) -> bool:
    """A card number: written in four groups of four (a mistyped card is still a card), or a run of 14-19 digits
    that passes the Luhn checksum."""
    digits = "".join(c for c in candidate if c.isdecimal())
    if len(set(digits)) < 2:
        return False
    if _CARD_GROUPS_RE.fullmatch(candidate.strip()):
        return True
    return CARD_MIN_DIGITS <= len(digits) <= 19 and _luhn_ok(digits)


def _credential_shaped(value: str) -> bool:
    """A digit, or a symbol inside a longer value: how a credential differs from a word ("again", "e.g.")."""
    core = value.strip(".,!?=:;-")
    return any(c.isdigit() for c in core) or (len(core) >= 6 and not core.isalnum())


def _plausible_secret(value: str, *, weak: bool = False) -> bool:
    """Whether the word after a password cue is the password, not talk about it."""
    if value.startswith("[REDACTED"):
        return False
    plain = value.strip(".!?")
    if plain.isascii():
        # Plain lowercase words: "wrong", "hashed", "expiring" describe a password.
        if plain.isalpha() and (
            plain.lower() in _NOT_A_PASSWORD or (plain.islower() and plain.endswith(_PROSE_SUFFIXES))
        ):
            return False
    elif not any(c.isdigit() or (c.isascii() and c.isprintable()) for c in value):
        # Only CJK text after the cue ("密码是不是太长了") is a sentence about the password: passwords are typed
        # in ASCII (or at least contain a digit).
        return False
    return _credential_shaped(value) if weak else True


def _utf8(text: str) -> bytes:
    """`text` as UTF-8, lone surrogates (which UTF-8 cannot hold, nor PostgreSQL store) replaced by U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


# A replacement callback: (text, match start, match end, group start, group end) -> what replaces the match.
# The group is the pattern's one capture group ("secret"), or the whole match for a pattern without one.
_Repl = Callable[[bytes, int, int, int, int], bytes]


def _sub(pattern: Any, repl: _Repl, data: bytes) -> bytes:
    """`pattern.sub` on UTF-8 bytes, for a pattern with at most one capture group.

    The re2 wrapper's str path re-maps byte offsets to str offsets for every match, and its match
    objects resolve group names per call: on input packed with short matches that was most of the time.
    Bytes in, spans out, a plain loop over `finditer`, cut it to a fraction.
    """
    grouped = pattern.groups > 0
    pieces: list[bytes] = []
    last = 0
    for m in pattern.finditer(data):
        start, end = m.span()
        g_start, g_end = m.span(1) if grouped else (start, end)
        pieces.append(data[last:start])
        pieces.append(repl(data, start, end, g_start, g_end))
        last = end
    if not pieces:
        return data
    pieces.append(data[last:])
    return b"".join(pieces)


_SCANNED: tuple[Any, ...] = (
    _PRIVATE_KEY_RE,
    _JWT_RE,
    *(pattern for _, pattern in _API_KEY_PATTERNS),
    _URL_CRED_RE,
    _SLASH_LOGIN_RE,
    _GO_DSN_RE,
    _SEED_PHRASE_RE,
    _BEARER_RE,
    _CN_ID_RE,
    _LABELLED_ID_RE,
    _PAN_RE,
    _LABELLED_PHONE_RE,
    _INTL_PHONE_RE,
    _CN_MOBILE_RE,
    _NANP_PHONE_RE,
    _PASSWORD_PROSE_RE,
    _ASSIGN_RE,
    _TOKEN_RE,
    _PASSWORD_WEAK_RE,
    _BRACKETED_SECRET_RE,
    _LOGIN_PAIR_RE,
    _ACCESS_CODE_RE,
    _SMS_CODE_RE,
    _YOUR_CODE_RE,
    _CODE_NAMED_AFTER_RE,
    _CODE_SHOWN_RE,
    _CODE_USED_RE,
)
"""Every RE2 pattern `redact_secrets` runs over the text (a test holds the two lists equal)."""
_SCANNED_STR: tuple[re.Pattern[str], ...] = (_CARD_RE, _IBAN_RE)
"""The patterns it runs on the decoded text with Python's `re`."""


def _any_scanned() -> Any:
    """One RE2 alternation of `_SCANNED`: a text none of them matches anywhere comes out of `redact_secrets`
    unchanged, and one pass over it tells so (about 6 µs a chat turn against 100 µs for the 38 passes; 0.6% of
    chat turns match). Capture groups are made plain, since names repeat across the patterns; each pattern's
    inline flags stay inside its own group."""
    plain = (re.sub(r"\(\?P<\w+>", "(?:", pattern.pattern) for pattern in _SCANNED)
    return re2.compile("|".join(f"(?:{p})" for p in plain))


_ANY_SCANNED_RE = _any_scanned()


def redact_secrets(text: str) -> Redaction:
    """Replace credentials and personal identifiers with `[REDACTED:kind]` markers."""
    out = _utf8(text)
    if _ANY_SCANNED_RE.search(out) is None and not any(p.search(text) for p in _SCANNED_STR):
        return Redaction(text=out.decode())  # the text itself, less any lone surrogate (as below)
    kinds: dict[str, bytes] = {}  # kind -> its marker, in order of first use

    def note(kind: str) -> bytes:
        mark = kinds.get(kind)
        if mark is None:
            mark = kinds[kind] = marker(kind).encode()
        return mark

    def whole(kind: str) -> _Repl:
        return lambda data, start, end, g_start, g_end: note(kind)

    def secret_part(kind: str, weak: bool = False) -> _Repl:
        # Only the captured value goes; the cue before it (and a URL's "@" after it) stays.
        def repl(data: bytes, start: int, end: int, g_start: int, g_end: int) -> bytes:
            if not _plausible_secret(data[g_start:g_end].decode(), weak=weak):
                return data[start:end]
            return data[start:g_start] + note(kind) + data[g_end:end]

        return repl

    def cn_id(data: bytes, start: int, end: int, g_start: int, g_end: int) -> bytes:
        # In place of the look-ahead: an ID glued to a following letter or digit is part of something longer.
        if end < len(data) and data[end] in _ASCII_ALNUM:
            return data[start:end]
        return data[start:g_start] + note("national_id")

    def labelled_id(data: bytes, start: int, end: int, g_start: int, g_end: int) -> bytes:
        groups = re.split(rb"([ \-.])", data[g_start:g_end])
        while groups and not any(c in b"0123456789" for c in groups[-1]):
            groups = groups[:-2]  # a word after the number ("… 67 I think") is not part of it
        value = b"".join(groups)
        digits = sum(c in b"0123456789" for c in value)
        mixed = len(groups) == 1 and len(value) >= 8 and digits >= 3 and digits < len(value)
        if digits < LABELLED_ID_MIN_DIGITS and not mixed:
            return data[start:end]
        return data[start:g_start] + note("id_number") + data[g_start + len(value) : end]

    def phone(data: bytes, start: int, end: int, g_start: int, g_end: int) -> bytes:
        # In place of the look-ahead: a number glued to a following letter or digit is part of something longer.
        if end < len(data) and data[end] in _ASCII_ALNUM:
            return data[start:end]
        digits = sum(c in b"0123456789" for c in data[g_start:g_end])
        if not PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1]:
            return data[start:end]
        return data[start:g_start] + note("phone_number") + data[g_end:end]

    def card(m: re.Match[str]) -> str:
        found = m.group(0)
        if _MORE_GROUPS_RE.match(m.string, m.end()):
            return found  # the first digits of a longer grouped number
        digits = sum(c.isdecimal() for c in found)
        if _is_card(found) or (
            15 <= digits <= 16 and _CARD_CUE_RE.search(m.string, max(0, m.start() - 32), m.start()) is not None
        ):
            return note("card_number").decode()
        lead = _CARD_GROUPS_RE.match(found)
        if lead and found[lead.end() : lead.end() + 1] in (" ", "-") and m.string[m.end() : m.end() + 1] == "/":
            # a card with its expiry after it ("… 6467 12/27"): the run read on into the month
            return note("card_number").decode() + found[lead.end() :]
        return found

    def iban(m: re.Match[str]) -> str:
        return note("id_number").decode() if _is_iban(m.group(0)) else m.group(0)

    def token(data: bytes, start: int, end: int, g_start: int, g_end: int) -> bytes:
        found = data[start:end]
        # In place of the look-ahead: padding glued to a following token character gives back one "=".
        give_back = b""
        if found.endswith(b"=") and end < len(data) and data[end] in _TOKEN_NEIGHBOUR:
            found, give_back = found[:-1], b"="
        # A content hash in its own notation ("sha256:4a5b…", "md5=…") names a file or an image; it opens nothing.
        if _DIGEST_LEAD_RE.search(data[max(0, start - 8) : start]) and _HEX_RE.fullmatch(found):
            return found + give_back
        # In place of the look-behind: a run right after "." is part of a dotted name or path; only what
        # follows a "+" inside it (a start the look-behind allowed) may still be a token.
        lead = b""
        if start > 0 and data[start - 1] == ord("."):
            cut = found.find(b"+") + 1
            if cut == 0 or len(found[cut:].rstrip(b"=")) < 24:
                return found + give_back
            lead, found = found[:cut], found[cut:]
        return lead + (note("token") if _looks_random(found.decode()) else found) + give_back

    out = _sub(_PRIVATE_KEY_RE, whole("private_key"), out)
    out = _sub(_JWT_RE, whole("jwt"), out)
    for kind, pattern in _API_KEY_PATTERNS:
        out = _sub(pattern, whole(kind), out)
    out = _sub(_URL_CRED_RE, secret_part("password"), out)
    out = _sub(_SLASH_LOGIN_RE, secret_part("password", weak=True), out)
    out = _sub(_GO_DSN_RE, secret_part("password"), out)
    out = _sub(_SEED_PHRASE_RE, secret_part("private_key"), out)
    out = _sub(_BEARER_RE, secret_part("token"), out)
    # IDs and cards before the password cues, so "密码是 4539 1488 0343 6467" loses the whole number, not
    # only its first group.
    out = _sub(_CN_ID_RE, cn_id, out)
    # The card and IBAN patterns are Python `re` on str (Unicode digits); one decoded copy serves both.
    decoded = _CARD_RE.sub(card, out.decode())
    out = _IBAN_RE.sub(iban, decoded).encode()
    out = _sub(_LABELLED_ID_RE, labelled_id, out)
    out = _sub(_PAN_RE, whole("id_number"), out)
    for pattern in (_LABELLED_PHONE_RE, _INTL_PHONE_RE, _CN_MOBILE_RE, _NANP_PHONE_RE):
        out = _sub(pattern, phone, out)
    out = _sub(_PASSWORD_PROSE_RE, secret_part("password"), out)
    out = _sub(_ASSIGN_RE, secret_part("secret"), out)
    out = _sub(_TOKEN_RE, token, out)
    # Last: a weak cue takes only what no sharper detector already claimed.
    out = _sub(_PASSWORD_WEAK_RE, secret_part("password", weak=True), out)
    out = _sub(_BRACKETED_SECRET_RE, secret_part("password", weak=True), out)
    out = _sub(_LOGIN_PAIR_RE, secret_part("password", weak=True), out)
    out = _sub(_ACCESS_CODE_RE, secret_part("secret", weak=True), out)
    out = _sub(_SMS_CODE_RE, secret_part("secret", weak=True), out)
    out = _sub(_YOUR_CODE_RE, secret_part("secret", weak=True), out)
    out = _sub(_CODE_NAMED_AFTER_RE, secret_part("secret", weak=True), out)
    out = _sub(_CODE_SHOWN_RE, secret_part("secret", weak=True), out)
    out = _sub(_CODE_USED_RE, secret_part("secret", weak=True), out)
    return Redaction(text=out.decode(), kinds=list(kinds))


def has_secret_marker(text: str) -> bool:
    return bool(MARKER_RE.search(text))


_KIND_WORDS_EN = {
    "api_key": "an API key",
    "github_token": "a GitHub token",
    "aws_key": "an AWS access key",
    "slack_token": "a Slack token",
    "google_api_key": "a Google API key",
    "password": "a password",
    "secret": "a secret credential",
    "token": "an access token",
    "jwt": "a JWT",
    "private_key": "a private key",
    "national_id": "an ID number",
    "card_number": "a card number",
    "id_number": "an account or ID number",
    "phone_number": "a phone number",
}
_KIND_WORDS_ZH = {
    "api_key": "API 密钥",
    "github_token": "GitHub 令牌",
    "aws_key": "AWS 访问密钥",
    "slack_token": "Slack 令牌",
    "google_api_key": "Google API 密钥",
    "password": "密码",
    "secret": "密钥",
    "token": "访问令牌",
    "jwt": "JWT 令牌",
    "private_key": "私钥",
    "national_id": "身份证号",
    "card_number": "银行卡号",
    "id_number": "账号或证件号码",
    "phone_number": "电话号码",
}


def describe_secret(kind: str, lang: str) -> str:
    """Words for "a secret of this kind exists", never its value."""
    table = _KIND_WORDS_ZH if lang == "zh" else _KIND_WORDS_EN
    return table.get(kind, "密钥" if lang == "zh" else "a credential")
