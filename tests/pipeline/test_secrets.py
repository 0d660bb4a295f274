import pytest

from pipeline.secrets import redact_secrets


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("key: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "api_key"),
        (
            "token ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",
            "ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",
            "github_token",
        ),
        ("AKIAQWERTYUIOPASDFGH in env", "AKIAQWERTYUIOPASDFGH", "aws_key"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij", "slack_token"),
        ("我的密码是 Tiger#2024ok，别外传", "Tiger#2024ok", "password"),
        ("the password is blue42fish", "blue42fish", "password"),
        ("pw: h4ck-me-not", "h4ck-me-not", "password"),
        # A weak cue (a space after the keyword, a login given as a pair) takes a credential-shaped value.
        ("network is Casa_5G, password Blue-Heron-5521", "Blue-Heron-5521", "password"),
        ("username admin password hunter22", "hunter22", "password"),
        ("login is admin / Osprey#2290", "Osprey#2290", "password"),
        ("creds: jsmith/Plum-Tree-42 for the staging box", "Plum-Tree-42", "password"),
        ("登录名是 admin/Qwe-12345，别外传", "Qwe-12345", "password"),
        ("账号密码 admin / Qwe12345", "Qwe12345", "password"),
        ("my pin 5820, don't tell anyone", "5820", "password"),
        ("wifi: GuestNet / pass: Lark-Song-31", "Lark-Song-31", "password"),
        # Codes that open something, a card's security code, an SSN named "social".
        ("the gate code is 7315# after 9pm", "7315#", "secret"),
        ("card ends 0005, cvv 482, exp 03/29", "482", "secret"),
        ("verification code 605118 just came in", "605118", "secret"),
        ("快递柜取件码 3-1-0417", "3-1-0417", "secret"),
        ("my social is 078-05-1120", "078-05-1120", "id_number"),
        # A value in brackets after its name or a few words on; a note in brackets between a label and its value.
        ("the kids' tablet PIN (4471) no longer works", "4471", "password"),
        ("the wifi password on the router's label (K7mQ92xT) works", "K7mQ92xT", "password"),
        ("密码（Lk2093mm）输了三遍都不对", "Lk2093mm", "password"),
        ("卡背面的安全码（三位数）：615", "615", "secret"),
        ("the invite code is Zq71bT, join before friday", "Zq71bT", "secret"),
        ("邀请码 QW82LM 填哪里", "QW82LM", "secret"),
        # A new password or PIN said as what it was set to; a code named after it or put to its use.
        ("finally changed my password to Lark-Song-31 after the breach", "Lark-Song-31", "password"),
        ("changed the door pin to 8841 last night", "8841", "password"),
        ("路由器密码改成了 Mm20251234，记一下", "Mm20251234", "password"),
        ("把支付宝密码设置为Zz887766了", "Zz887766", "password"),
        ("they texted 5521 as the verification code", "5521", "secret"),
        ("use 481920 to sign in, it said", "481920", "secret"),
        ("the login code on my phone says 883 201 and it keeps failing", "883 201", "secret"),
        ("身份验证器显示 550 812，一直提示错误", "550 812", "secret"),
        # A company's or a sole trader's tax number, by its label.
        ("统一社会信用代码 91350100M000100Y43 开票用", "91350100M000100Y43", "id_number"),
        ("营业执照号 330106000123456，帮我核对一下", "330106000123456", "id_number"),
        ("组织机构代码：79358226-4 填在哪", "79358226-4", "id_number"),
        ("our VAT number is GB 123 4567 89", "123 4567 89", "id_number"),
        ("UEN 53312987W for the invoice", "53312987W", "id_number"),
        ("pay it to NL91ABNA0417164300 by friday", "NL91ABNA0417164300", "id_number"),
        ("4539 1488 0343 6467 12/27, billing zip 94110", "4539 1488 0343 6467", "card_number"),
        ("card 4539 1488 0343 6467 0927 is the pin", "4539 1488 0343 6467", "card_number"),
        ("routing 026009593 account 7730192846 for direct deposit", "7730192846", "id_number"),
        ("my aadhaar is 2841 7730 9165", "2841 7730 9165", "id_number"),
        ("broker is redis://:rEd1s-Pass@10.0.0.7:6379/0", "rEd1s-Pass", "password"),
        ("jdbc:oracle:thin:app/Pine2031x@//db1:1521/XE in the yml", "Pine2031x", "password"),
        ("api key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "9f86d081884c7d", "token"),
        ("JCB 3519528590031448 for the deposit", "3519528590031448", "card_number"),
        ("card number: 4083740718818175", "4083740718818175", "card_number"),
        ("信用卡号是 6222021234567891，帮我填表", "6222021234567891", "card_number"),
        ("form wants Passport #, it's 562218841, but", "562218841", "id_number"),
        ("签证表格里护照号填 E73920416 对吧", "E73920416", "id_number"),
        ("台湾身份证字号 F227481936，在大陆订酒店", "F227481936", "id_number"),
        ("my PAN is ABKPT4821M, link it to my bank", "ABKPT4821M", "id_number"),
        ('dsn := "app:AppPw_78@tcp(127.0.0.1:3306)/blog"', "AppPw_78", "password"),
        ("sha256:Ab9Kx2mQ7pLz8RtY4wVn3JcH6sDf is not hex", "Ab9Kx2mQ7pLz8RtY4wVn3JcH6sDf", "token"),
        ("pw kettle77kettle lol", "kettle77kettle", "password"),
        ("the pass is Maple&Birch1987 if it matters", "Maple&Birch1987", "password"),
        ("guest SSID CafeNord, wifi key: flat-white-2031", "flat-white-2031", "password"),
        ("G-442918 is your Google verification code", "G-442918", "secret"),
        ("your Lyft code: 8806", "8806", "secret"),
        ("the creds are root / Vx7#kLp2wQ for staging", "Vx7#kLp2wQ", "password"),
        ("交易密码（股票账户）：771025", "771025", "password"),
        ("卡背面签名栏后三位是739", "739", "secret"),
        ("小区门禁码是 #2580#", "#2580#", "secret"),
        ("office door keypad: 7731*", "7731*", "secret"),
        ("DL 84729103 TX, moving to colorado", "84729103", "id_number"),
        ("港澳通行证号 C48210937，签注到期了", "C48210937", "id_number"),
        (
            "sendgrid key SG.Zip2SFXy7KSE3eJdRtEqlz.Iq47EuVTBZWAM8AD5qH4VFZBqplIXds",
            "SG.Zip2SFXy7KSE3eJdRtEqlz",
            "api_key",
        ),
        ("token ya29.a0AfH6SMBx3kQ-9EEa4rSMrsEQp2vt7ZAoLbU", "ya29.a0AfH6SMBx3kQ-9EEa4rSMrsEQp2vt7ZAoLbU", "token"),
        ("lockbox combo 2-7-1-8, key inside", "2-7-1-8", "secret"),
        ("收到短信：验证码 5 1 9 3 0 2，五分钟内有效", "5 1 9 3 0 2", "secret"),
        ("支付密码6位：402817，老人记不住", "402817", "password"),
        (
            "my seed phrase is 'amber canal velvet rocket tiny humble excess pledge ocean fury lumber quiet'",
            "amber canal velvet rocket tiny humble excess pledge ocean fury lumber quiet",
            "private_key",
        ),
        (
            "doctl auth init --access-token dop_v1_5fd21ef66b01d4921da2e055c90eb6f2aed4c21a9dbf49a067e24bdb7ec8e1a2",
            "dop_v1_5fd21ef66b01d4921da2e055c90eb6f2aed4c21a9dbf49a067e24bdb7ec8e1a2",
            "token",
        ),
        ("身份证 11010519491231002X 请核对", "11010519491231002X", "national_id"),
        ("card 4539 1488 0343 6467 expires soon", "4539 1488 0343 6467", "card_number"),
        ("mysql://admin:S3cr3tPw@db.internal:3306/app", "S3cr3tPw", "password"),
        ("DB_PASSWORD=Qw8rTy2uIo", "Qw8rTy2uIo", "secret"),
        # Labelled account and identity numbers, whatever their checksum or shape.
        ("card number 4111 1111 1111 1112, the debit one", "4111 1111 1111 1112", "card_number"),
        # Four groups of four are a card whatever the checksum: a mistyped card still gives most of it away.
        ("card 4539 1488 0343 6468 fails the checksum", "4539 1488 0343 6468", "card_number"),
        ("passport no. C4RF72XN9 for the form", "C4RF72XN9", "id_number"),
        ("身份证 500103 19901228 9926 这样分段写对吗", "500103 19901228 9926", "id_number"),
        ("驾照档案编号：3101 0293 8471，怎么绑定", "3101 0293 8471", "id_number"),
        ("sort code 20-45-67 and account number 41234567", "20-45-67", "id_number"),
        ("sort code 20-45-67 and account number 41234567", "41234567", "id_number"),
        ("my SSN is 123-45-6789 I think", "123-45-6789", "id_number"),
        ("IBAN: GB29 NWBK 6016 1331 9268 19 for the rent", "6016 1331 9268 19", "id_number"),
        ("passport no. E12345678 expires in May", "E12345678", "id_number"),
        ("护照号码：E12345678，下个月出国", "E12345678", "id_number"),
        ("我的银行卡号是 6222 0212 3456 7890 123", "6222 0212 3456 7890 123", "id_number"),
        ("社保卡号 123456789012 丢了", "123456789012", "id_number"),
        # Phone numbers: personal contact details, by their shape or by the cue that names them.
        ("我每天跑 5 公里，电话 13912345678", "13912345678", "phone_number"),
        ("手机号是138 1111 2222，有事打", "138 1111 2222", "phone_number"),
        ("打给我 +86 138-1111-2222 就行", "+86 138-1111-2222", "phone_number"),
        ("办公室座机：010-62345678", "010-62345678", "phone_number"),
        ("my number is +44 7700 900123 if the courier calls", "+44 7700 900123", "phone_number"),
        ("call me at 07700 900123 after six", "07700 900123", "phone_number"),
        ("office line (415) 555-0123, ask for Dana", "(415) 555-0123", "phone_number"),
        ("reach me on 415.555.0123", "415.555.0123", "phone_number"),
        ("my cell # is 555-0123", "555-0123", "phone_number"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str, kind: str) -> None:
    r = redact_secrets(text)
    assert secret not in r.text
    assert kind in r.kinds
    assert f"[REDACTED:{kind}]" in r.text


def test_private_key_and_jwt() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----"
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    r = redact_secrets(f"here {pem} and {jwt}")
    assert "MIIEowIBAAKCAQEA7x" not in r.text
    assert "eyJhbGci" not in r.text
    assert {"private_key", "jwt"} <= set(r.kinds)


def test_high_entropy_token() -> None:
    r = redact_secrets("use q8Zt3LkP0vWx7RmN2bYc5HjD9sFa4GeU to auth")
    assert "q8Zt3LkP0vWx7RmN2bYc5HjD9sFa4GeU" not in r.text


@pytest.mark.parametrize(
    "text",
    [
        "I upgraded to PostgreSQL 15.4 in 2023",
        "order number 1234567890123 shipped",
        "tracking 9400111899223197428490 says Tuesday",
        "my phone is a Pixel 8 and the phone bill is 45 a month",
        "revenue grew +15% to 1,381,111,222 yen",
        "ISBN 978-3-16-148410-0",
        "we moved to Tel Aviv in 2019",
        "phone: 12 missed calls",
        "build 138123456789 passed",
        "my USPS package 9400 1118 9922 3344 5566 77 hasn't moved",
        "商品条码 6901234567892 是哪个厂家的",
        "the password is wrong again",
        "the password manager syncs fine",
        "I reset my password 3 times",
        "password reset links expire",
        "user / group permissions are a mess",
        "the login / signup page redesign",
        "用户名 / 密码 都忘了",
        "我的抖音账号粉丝有两万多，2024年开始做的",
        "账号注册在美区，iPhone15 上登录的",
        "login broke, 2024 release",
        "密码管理器用的是1Password",
        "key: 2024 goals",
        "your zip code is 10001, right?",
        "94110 is your zip code",
        "my account is locked since 2024",
        "我家装了密码锁，2023年买的",
        "身份证2019年办的，快过期了",
        "the auth code flow is weird",
        "the door code is broken again",
        "my zip code is 10001",
        "boarding pass: gate B12",
        "social media has 120000 followers",
        "I pin 3 tabs",
        "I had to reset my password (again) today",
        "I changed my password to something stronger",
        "密码改成了生日，好记",
        "use 2024 to continue the series",
        "the auth code flow is 3 steps",
        "the verification code step in our app is 2x faster now",
        "I went to the gym 3 times as the code said",
        "the PIN (personal identification number) has four digits",
        "VAT is 20% here and GST 18%",
        "ABN AMRO closed my branch in 2023",
        "the invite code flow is broken on signup",
        "the code is in python",
        "part number AB12CDEF34GH5678 in stock",
        "my account has 3 users",
        "the primary key: id",
        "use snake_case_names_like_this_one_here_ok",
        "see src/components/very_long_component_name_here.tsx",
        "my_really_long_snake_case_identifier_name is fine",
        "my card number ends in 4242",
        "I have a card with 500000 points",
        "the account number 12345 is too short to be one",
        "会员卡 12 张",
        "my card has 1500000000000000 reward points",
        "the time was 12:30 at the tcp(ip) talk",
        "pin it: docker pull library/python3@sha256:4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b",
        "checksum sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches",
        "ghcr.io/acme/api-v2@sha256:0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    r = redact_secrets(text)
    assert r.text == text
    assert r.kinds == []


def test_the_one_pass_that_clears_a_text_covers_every_pattern_redaction_runs() -> None:
    """`redact_secrets` returns a text at once when one alternation of its patterns finds nothing in it: a pattern
    it runs but the alternation lacks would let that pattern's secrets through."""
    import inspect
    import re

    import pipeline.secrets as secrets

    source = inspect.getsource(secrets.redact_secrets)
    named = {name: getattr(secrets, name) for name in re.findall(r"\b(_[A-Z0-9_]+_RE)\b", source)}
    # every RE2 pattern it names is a scan (the checks inside its callbacks use Python's re), as is each `re` .sub
    scans = [p for p in named.values() if type(p).__module__.startswith("re2") and p is not secrets._ANY_SCANNED_RE]
    scans += [p for _, p in secrets._API_KEY_PATTERNS] if "_API_KEY_PATTERNS" in source else []
    str_scans = [named[name] for name in re.findall(r"\b(_[A-Z0-9_]+_RE)\.sub\(", source)]
    assert {id(p) for p in scans} == {id(p) for p in secrets._SCANNED}
    assert {id(p) for p in str_scans} == {id(p) for p in secrets._SCANNED_STR}
    # and the pass clears chat that holds none, and keeps what it must scan
    assert secrets._ANY_SCANNED_RE.search("我周末去爬山了，I work at Ocado as an SRE".encode()) is None
    assert redact_secrets("my pin 5820, don't tell anyone").kinds == ["password"]
