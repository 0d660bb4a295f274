from pipeline.text import (
    core_negated,
    detect_lang,
    extract_numbers,
    extract_versions,
    has_change_cue,
    is_negated,
    normalize,
    numbers_conflict,
    remembered,
    reply_kind,
    split_clauses,
    split_sentences,
    zh_numeral_to_int,
)


def test_normalize_fullwidth_traditional_and_invisible() -> None:
    assert normalize("ＡＰＩ　Ｖ２") == "API V2"
    assert normalize("我們喜歡這個軟體") == "我们喜欢这个软体"
    assert normalize("ke\u200by\U000e0041") == "key"


def test_detect_lang() -> None:
    assert detect_lang("我平时用 Neovim 写 Rust") == "zh"
    assert detect_lang("I mostly write Rust in Neovim") == "en"


def test_split_sentences_keeps_versions_and_titles() -> None:
    assert split_sentences("I run Python 3.12 daily. Dr. Lee is my GP.") == [
        "I run Python 3.12 daily.",
        "Dr. Lee is my GP.",
    ]


def test_a_chat_sentence_may_start_in_lower_case() -> None:
    assert split_sentences("ugh ok rotating them. this is for my pottery shop's site") == [
        "ugh ok rotating them.",
        "this is for my pottery shop's site",
    ]
    # Abbreviations, initials and versions still hold together.
    assert split_sentences("I like fruit, e.g. apples. Call me at 9 a.m. tomorrow, on v2.1 now.") == [
        "I like fruit, e.g. apples.",
        "Call me at 9 a.m. tomorrow, on v2.1 now.",
    ]


def test_split_clauses_chinese_and_english() -> None:
    assert split_clauses("我住在杭州，今天有点累。") == ["我住在杭州", "今天有点累"]
    assert split_clauses("密码是 [REDACTED:password]：别外传") == ["密码是 [REDACTED:password]", "别外传"]
    assert split_clauses("I live in Oslo, but I'm exhausted today.") == [
        "I live in Oslo",
        "I'm exhausted today",
    ]


def test_a_chinese_clause_of_time_is_the_frame_of_the_clause_after_it() -> None:
    # "…的时候" says when what follows holds; it states nothing by itself
    assert split_clauses("我读研的时候，住在南京，现在在苏州") == ["我读研的时候，住在南京", "现在在苏州"]
    assert split_clauses("小时候那会儿 家里养过鸡") == ["小时候那会儿，家里养过鸡"]
    # at the end of a sentence it stays a clause of its own
    assert split_clauses("我最喜欢下雪的时候") == ["我最喜欢下雪的时候"]


def test_negation() -> None:
    assert is_negated("我不吃香菜")
    assert is_negated("我已经不再用 Eclipse 了")
    assert is_negated("I don't drink coffee")
    assert is_negated("She is no longer on the team")
    assert is_negated("我对花生不过敏")  # 不过敏 is a negation, 不过 (however) is not
    assert not is_negated("这个方案不错")
    assert not is_negated("I like tea")


def test_contrastive_tail_is_not_the_statement() -> None:
    assert not core_negated("I use Rust now, not C++ anymore")
    assert core_negated("I don't use C++")


def test_numbers_and_versions() -> None:
    assert extract_numbers("MySQL 8.0 跑 5 公里") == {"8", "5"}
    assert "3" in extract_numbers("三月份开始")
    assert zh_numeral_to_int("二十五") == 25
    assert extract_versions("PostgreSQL 15 and Node 20") == {"postgresql": "15", "node": "20"}
    assert numbers_conflict("uses MySQL 5.7", "uses MySQL 8.0")
    assert not numbers_conflict("prefers PostgreSQL", "on PostgreSQL 16")
    assert not numbers_conflict("MySQL 8", "MySQL 8.0")


def test_a_space_between_chinese_characters_ends_a_clause() -> None:
    # Chat often puts a space where the comma belongs; a space beside a Latin word or a number is word spacing.
    assert split_clauses("我妈有高血压 每天吃药 她能吃西柚吗") == ["我妈有高血压", "每天吃药", "她能吃西柚吗"]
    assert split_clauses("我用 VS Code 写 Python") == ["我用 VS Code 写 Python"]
    assert split_clauses("下个月 15 号去成都") == ["下个月 15 号去成都"]
    assert split_clauses("还行吧　刚下班") == ["还行吧", "刚下班"]  # an ideographic space too


def test_and_starts_a_clause_before_a_request_or_a_new_subject() -> None:
    assert split_clauses("I run a small bakery in Leeds and want a formula for costs") == [
        "I run a small bakery in Leeds",
        "want a formula for costs",
    ]
    assert split_clauses("took up chess a month ago and my brain is fried today") == [
        "took up chess a month ago",
        "my brain is fried today",
    ]
    assert split_clauses("I live with my wife and my son") == ["I live with my wife and my son"]


def test_change_cues() -> None:
    assert has_change_cue("我们把后端换成 Go 了")
    assert has_change_cue("雅思不考了")  # 不 + verb + 了: no longer
    assert has_change_cue("我现在已经开始吃肉了")
    assert has_change_cue("我从后端转岗到算法组了")
    assert not has_change_cue("这家店还不错了")
    assert not has_change_cue("我不知道了")
    assert has_change_cue("我去年搬到成都")
    assert has_change_cue("I switched to Fedora last year")
    assert has_change_cue("I no longer eat meat")
    assert not has_change_cue("I like Fedora")
    assert not has_change_cue("From now on call me Sam")
    # a state that began at a time replaced whatever held before it
    assert has_change_cue("been pescatarian since the spring")
    assert has_change_cue("we've lived in Porto since 2021")
    assert has_change_cue("I've been working at a bakery since last summer")
    assert not has_change_cue("I've been tired all week")
    assert not has_change_cue("since you asked, I like Fedora")
    # something given up
    assert has_change_cue("I ditched Trello for a paper notebook")
    assert has_change_cue("piano kind of fell by the wayside after the move")
    # a whole setup moved, with what moved between the verb and "to"; one's own appointment moving is no change
    assert has_change_cue("I switched everything over to a MacBook Air")
    assert has_change_cue("we moved our whole backend to Rust")
    assert not has_change_cue("I moved my dentist appointment to Friday")
    # 改 + a verb: switched to doing; not 修改, 改天, 改进
    assert has_change_cue("我最近改学韩语了")
    assert has_change_cue("早上改喝豆浆")
    assert not has_change_cue("我改天再问你")
    assert not has_change_cue("帮我修改一下简历")
    assert has_change_cue("我刚刚开始了新的生活教练工作")  # started a new job, as "new job" in English
    # 是…的 splits a change from its object, or follows when it was done
    assert has_change_cue("前年冬天搬的家")
    assert has_change_cue("上礼拜刚卖的那辆车")
    assert not has_change_cue("我卖的是二手书")
    assert not has_change_cue("换的时候记得备份")
    assert not has_change_cue("每天换的衣服都堆在椅子上")  # what is changed every day is no change of state
    assert not has_change_cue("我想找新工作")
    assert has_change_cue("去年伤了膝盖以后就没再跑过")  # 没再: not since
    assert has_change_cue("spanish is officially shelved")
    assert has_change_cue("our old cat passed away in March")
    # a death said as how it came ("老死了", "病死了") or in the written word (离世, 病逝); not 死了 of degree
    assert has_change_cue("仓鼠前几天老死了")
    assert has_change_cue("外公去年离世了")
    assert not has_change_cue("今天热死了")
    # a marriage, someone named lost; not keys or weight
    assert has_change_cue("我跟我老婆上个月刚领的证")
    assert has_change_cue("we got married in May")
    assert has_change_cue("We lost Biscuit in March")
    assert not has_change_cue("I lost my keys today")
    assert not has_change_cue("我去领快递")


def test_and_my_with_its_own_verb_starts_a_second_clause() -> None:
    assert split_clauses("i walk my dog to the park every morning and my shoes got muddy today") == [
        "i walk my dog to the park every morning",
        "my shoes got muddy today",
    ]
    assert split_clauses("I cook for my wife and my two kids") == ["I cook for my wife and my two kids"]


def test_reply_kind() -> None:
    assert reply_kind("是的，没错") == "confirm"
    assert reply_kind("Yep, that's right") == "confirm"
    assert reply_kind("不是，我在广州") == "reject"
    assert reply_kind("Actually I moved to Leeds") == "reject"
    assert reply_kind("帮我写个脚本") is None


def test_so_without_a_comma_joins_two_clauses_unless_it_is_a_degree_word() -> None:
    assert split_clauses("im pescatarian so fish is my main protein and im bored of lemon") == [
        "im pescatarian",
        "fish is my main protein",
        "im bored of lemon",
    ]
    assert split_clauses("I do 3D rendering for work so render times cost me money") == [
        "I do 3D rendering for work",
        "render times cost me money",
    ]
    assert split_clauses("I'm so tired of this") == ["I'm so tired of this"]
    assert split_clauses("I love my garden so much") == ["I love my garden so much"]
    assert split_clauses("it's been so long since I ran") == ["it's been so long since I ran"]


def test_a_fronted_time_clause_ends_where_the_main_subject_starts() -> None:
    assert split_clauses("Now that I'm at Monzo I have to write self-reviews") == [
        "Now that I'm at Monzo",
        "I have to write self-reviews",
    ]
    assert split_clauses("Ever since the move to Leeds my commute is all hills") == [
        "Ever since the move to Leeds",
        "my commute is all hills",
    ]
    assert split_clauses("since when do I need a visa for Peru") == ["since when do I need a visa for Peru"]
    assert split_clauses("After dinner I usually walk the dog") == ["After dinner I usually walk the dog"]


def test_changes_said_in_the_present_perfect_or_as_a_habit_that_did_not_last() -> None:
    assert has_change_cue("I've gone vegan")
    assert has_change_cue("we have relocated to Porto")
    assert has_change_cue("I now work from home")
    assert has_change_cue("keto didn't stick")
    assert has_change_cue("I've put Spanish on hold")
    # A new interest joins the old ones: no cue.
    assert not has_change_cue("I've become really interested in chess")
    assert not has_change_cue("I've taken up pottery")


def test_a_pronoun_after_a_preposition_does_not_end_a_fronted_clause() -> None:
    assert split_clauses("After the move from my old PaaS to fly.io the app boots in 20s") == [
        "After the move from my old PaaS to fly.io the app boots in 20s"
    ]


def test_a_question_without_its_mark_runs_on_into_a_statement_at_its_own_subject() -> None:
    assert split_clauses("whats a good marinade for salmon im pescatarian") == [
        "whats a good marinade for salmon",
        "im pescatarian",
    ]
    assert split_clauses("what should i cook tonight my wife is vegetarian") == [
        "what should i cook tonight",
        "my wife is vegetarian",
    ]
    # "my"/"I'm" after a verb or a preposition of the question still belongs to it.
    assert split_clauses("how do I get my money back") == ["how do I get my money back"]
    assert split_clauses("what is my name again") == ["what is my name again"]


def test_remembered_keeps_short_texts_and_computes_long_ones_every_time() -> None:
    """A distillation reads each turn several times, so pure text functions are cached; a turn may hold 32,000
    characters, so only short texts are kept (the cache's memory is bounded by entries × max_chars)."""
    calls: list[str] = []

    @remembered(maxsize=8, max_chars=10)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert [upper("short"), upper("short")] == ["SHORT", "SHORT"]
    assert calls == ["short"]
    long = "x" * 11
    assert [upper(long), upper(long)] == [long.upper()] * 2
    assert calls == ["short", long, long]
    for i in range(9):  # past maxsize, the oldest entry goes
        upper(str(i))
    upper("short")
    assert calls.count("short") == 2


def test_chat_ends_sentences_after_numbers_acronyms_brackets_and_emoji() -> None:
    # Lower-case chat: a period after a number, an acronym or a bracket ends a sentence before a lower-case word too,
    # and an emoji followed by a space is a full stop.
    assert split_sentences("just bought a kindle 11. how do i sideload epubs") == [
        "just bought a kindle 11.",
        "how do i sideload epubs",
    ]
    assert split_sentences("our api runs on AWS. what region is cheapest") == [
        "our api runs on AWS.",
        "what region is cheapest",
    ]
    assert split_sentences("I'm vegan (since 2019). anyway what's for dinner") == [
        "I'm vegan (since 2019).",
        "anyway what's for dinner",
    ]
    assert split_sentences("又要加班了😩 我在成都做前端") == ["又要加班了😩", "我在成都做前端"]
    # What stays whole: a decimal, an abbreviation, dotted initials.
    assert split_sentences("I paid 12.50 for it. ok") == ["I paid 12.50 for it.", "ok"]
    assert split_sentences("compared React vs. vue today") == ["compared React vs. vue today"]
    assert split_sentences("I moved to the U.K. last year") == ["I moved to the U.K. last year"]


def test_a_couple_as_subject_and_a_hedge_are_clause_boundaries() -> None:
    # "my husband and I are …" is one subject and starts a clause of its own; "I are" is never a new clause.
    assert split_clauses("I'm a dentist and my husband and I are buying a flat in Porto") == [
        "I'm a dentist",
        "my husband and I are buying a flat in Porto",
    ]
    assert split_clauses("my sister and I have a podcast") == ["my sister and I have a podcast"]
    assert split_clauses("I teach piano and I coach chess") == ["I teach piano", "I coach chess"]
    # A hedge says why the fact is mentioned, not what it is.
    assert split_clauses("I fly a DJI drone, in case that matters") == ["I fly a DJI drone", "in case that matters"]
    assert split_clauses("I'm on a Mac, if that helps") == ["I'm on a Mac", "if that helps"]


def test_a_present_state_with_a_closing_now_is_a_change_but_the_moment_is_not() -> None:
    assert has_change_cue("I'm retired now")
    assert has_change_cue("we live in Porto now.")
    assert has_change_cue("im vegetarian now lol")
    assert not has_change_cue("I'm really into jazz right now")
    assert not has_change_cue("I've been running for a few years now")
    assert not has_change_cue("I'm just enjoying my time off for now")
    assert not has_change_cue("I have to go now")
    assert not has_change_cue("we can start planning now")


def test_a_closing_now_counts_where_the_words_run_on_past_it() -> None:
    """A fact's words often carry the clause after it: "now" closes its part, not the whole text."""
    assert has_change_cue("I keep my recipes in Paprika now, the notebook got too messy")
    assert has_change_cue("we're a two-cat household now; the second one found us")
    assert not has_change_cue("I have to go now, talk later")
    assert not has_change_cue("I'm at my desk right now, the weather is awful")


def test_something_owned_that_is_gone_is_a_change() -> None:
    assert has_change_cue("we sold the camper van in the spring")
    assert has_change_cue("I got rid of my old Kindle")
    assert has_change_cue("I gave my bike away")
    assert has_change_cue("房子去年卖了")
    assert has_change_cue("外婆前年去世了")
    assert not has_change_cue("I gave a talk at the meetup")
    assert not has_change_cue("the shop sold out of oat milk")


def test_chinese_changes_a_role_taken_up_a_partner_left_something_put_down_a_degree_finished() -> None:
    assert has_change_cue("我这个月开始正式当前端组的组长了")
    assert has_change_cue("跟小雨分了 上个月的事")
    assert has_change_cue("日语我其实已经放下了")
    assert has_change_cue("我七月份毕业了")
    assert has_change_cue("I graduated in May")
    assert not has_change_cue("把蛋糕分了")
    assert not has_change_cue("我开始做饭了")
    assert not has_change_cue("书放下了就走")


def test_switching_to_an_activity_stopping_one_and_a_job_that_ended_are_changes() -> None:
    changes = ["膝盖不行了，改游泳", "跑步也停了", "健身早就停了", "我被裁了"]
    changes += ["I got laid off in May", "I retired in 2020"]
    for said in changes:
        assert has_change_cue(said), said
    for said in ("雨停了", "我改天再说", "改写了一下开头", "I got fired up about it"):
        assert not has_change_cue(said), said


def test_a_job_that_ended_is_told_from_other_endings() -> None:
    from pipeline.extract import JOB_ENDED_RE

    for said in ("我辞职了", "上个月离职了", "I quit my job", "got let go last week", "I retired in 2020"):
        assert JOB_ENDED_RE.search(said), said
    for said in ("I quit smoking", "I retired my old laptop", "I've resigned myself to it", "left the company party"):
        assert not JOB_ENDED_RE.search(said), said


def test_moving_out_of_one_thing_into_another_is_a_change() -> None:
    for said in ("finally moved everything out of Notion into Obsidian", "I moved out of my parents' place"):
        assert has_change_cue(said), said
    for said in ("moved my appointment into the afternoon", "ran out of milk"):
        assert not has_change_cue(said), said


def test_moving_back_and_deleting_an_app_are_changes() -> None:
    for said in ("我搬回南京了", "微信读书我删了", "I uninstalled Instagram"):
        assert has_change_cue(said), said


def test_an_animal_rehomed_and_a_service_or_account_ended_are_changes() -> None:
    """ "we rehomed the fish", "cancelled my gym membership", "closed my chase account": what the user had ended. A
    meeting or a reservation cancelled, or a rehoming only thought of, changes nothing that lasts."""
    for said in (
        "We rehomed the fish with a neighbour when Pepper arrived",
        "we had to rehome the cat because of the allergies",
        "cancelled my gym membership, i run outside now",
        "closed my chase account and moved everything to a credit union",
        "unsubscribed from netflix",
        "deleted my instagram account",
    ):
        assert has_change_cue(said), said
    for said in (
        "cancelled the meeting with the landlord",
        "cancelled my dinner reservation",
        "we might need to rehome the cat",
        "need to unsubscribe from like 40 newsletters",
    ):
        assert not has_change_cue(said), said


def test_these_days_is_a_change_of_state() -> None:
    assert has_change_cue("these days I'm at Stripe")
    assert has_change_cue("I'm vegetarian nowadays")


def test_a_short_statement_and_another_subjects_statement_are_two_clauses() -> None:
    """ "I'm diabetic and my wife is vegan" says one thing of the user and one of the wife; "My dad and my mom are
    teachers" has one subject of two people."""
    assert split_clauses("I'm diabetic and my wife is vegan") == ["I'm diabetic", "my wife is vegan"]
    assert split_clauses("My dad and my mom are teachers") == ["My dad and my mom are teachers"]


def test_a_job_changed_is_a_change_and_ends_the_old_job() -> None:
    from pipeline.extract import JOB_ENDED_RE

    for said in ("我老公换工作了", "I changed jobs in May", "去年跳槽了"):
        assert has_change_cue(said), said
        assert JOB_ENDED_RE.search(said), said


def test_a_comma_inside_brackets_ends_no_clause() -> None:
    """ "我家年糕（蓝猫，两岁）最近掉毛" was cut inside the brackets, leaving the value "用户家年糕(蓝猫"."""
    from pipeline.text import split_clauses

    assert split_clauses("我家年糕（蓝猫，两岁）最近掉毛") == ["我家年糕（蓝猫，两岁）最近掉毛"]
    assert split_clauses("我在上海（浦东），做后端") == ["我在上海（浦东）", "做后端"]
    assert split_clauses("I moved to Leeds (well, near it), and I work at Sky")[0] == "I moved to Leeds (well, near it)"


def test_a_measure_that_dropped_is_no_change() -> None:
    """ "dropped Spanish" gives something up; "revenue dropped 12%" is a reading of the moment."""
    from pipeline.text import has_change_cue

    assert has_change_cue("I dropped Spanish last year")
    assert not has_change_cue("this quarter revenue dropped 12%")
    assert not has_change_cue("signups dropped by a third")


def test_a_times_colon_ends_no_clause() -> None:
    assert split_clauses("我每天早上 7:30 到公司，晚上六点走") == ["我每天早上 7:30 到公司", "晚上六点走"]
    assert split_clauses("健身房 6：45 开门") == ["健身房 6：45 开门"]
    assert split_clauses("两个习惯：早睡，早起") == ["两个习惯", "早睡", "早起"]
    assert split_clauses("版本：3.2") == ["版本", "3.2"]


def test_pos_cut_cuts_and_tags_as_jieba_does_the_second_time_too() -> None:
    """`pos_cut` remembers how jieba's HMM tagged each run of characters; what it gives must stay jieba's."""
    import json
    from pathlib import Path

    import jieba.posseg as pseg

    from pipeline.text import pos_cut

    data = Path(__file__).resolve().parents[2] / "hindsight/training/data/dialogue_clauses_zh.jsonl"
    lines = [json.loads(line)["text"] for line in data.read_text(encoding="utf-8").splitlines()[:400]]
    texts = lines + ["，".join(lines[i : i + 5]) for i in range(0, len(lines), 5)] + ["老王说小雨下周去成都", ""]
    for _ in range(2):  # the first pass fills what it remembers, the second reads it
        assert [[tuple(p) for p in pos_cut(t)] for t in texts] == [[tuple(p) for p in pseg.lcut(t)] for t in texts]
