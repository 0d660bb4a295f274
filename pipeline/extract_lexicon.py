"""Cue words of the general linguistic rules of the offline extractor, Chinese and English.

Questions, requests, hypotheticals and plans, time-bound and mood words, reported speech cues, discourse
fillers, relations between people: the rules that decide what is *not* a stable statement of the speaker's.
Whether a clause states a stable fact, and which slot it fills, is not decided here: the learned classifier
does that (pipeline/slot_model.py, slots from pipeline/slots.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.timeref import ZH_NOT_MONTH_WORD, ZH_THIS
from schemas.pipeline import MemoryKind


@dataclass(frozen=True)
class Attribute:
    name: str
    """Key suffix, e.g. `city` → `user.city` (a slot name of pipeline/slots.py, or `identity`)."""
    kind: MemoryKind
    zh: re.Pattern[str] | None
    en: re.Pattern[str] | None


K = MemoryKind

# A decision ("let's go with Postgres", "那就换 Riverpod") is a speech act, kept whatever it is about.
DECISION_ZH = re.compile(r"决定|定下来|定了|那就(?:换成?|用|选|改用)|^就(?:换成?|用|选|改用)|选定")
DECISION_EN = re.compile(
    r"\bdecided\b|\bsticking with\b|\bgoing with\b|"
    r"\b(?:let's|we'll|I'll) (?:go with|stick with|switch to|move to|migrate to)\b",
    re.I,
)

# --- who a clause is about ---------------------------------------------------------------------------

ZH_RELATIONS: dict[str, str] = {
    "儿子": "son",
    "女儿": "daughter",
    "孩子": "child",
    "老婆": "wife",
    "妻子": "wife",
    "太太": "wife",
    "爱人": "spouse",
    "老公": "husband",
    "丈夫": "husband",
    "爸爸": "father",
    "老爸": "father",
    "父亲": "father",
    "爸": "father",
    "妈妈": "mother",
    "老妈": "mother",
    "母亲": "mother",
    "妈": "mother",
    "哥哥": "brother",
    "弟弟": "brother",
    "姐姐": "sister",
    "妹妹": "sister",
    # said with one character after 我 as often as with two ("我姐在腾讯上班", "我妹换成QQ音乐了")
    "哥": "brother",
    "弟": "brother",
    "姐": "sister",
    "妹": "sister",
    "哥们儿": "friend",  # "my buddy", not "my brother"
    "哥们": "friend",
    "姐妹": "friend",
    "闺蜜": "friend",
    "朋友": "friend",
    "同事": "colleague",
    "领导": "boss",
    "老板": "boss",
    "上司": "boss",
    "导师": "advisor",
    "室友": "roommate",
    "男朋友": "partner",
    "女朋友": "partner",
    "对象": "partner",
    "同学": "classmate",
    "客户": "client",
    "合伙人": "business_partner",
    "爷爷": "grandparent",
    "奶奶": "grandparent",
    "外公": "grandparent",
    "外婆": "grandparent",
    "队友": "teammate",
    "男友": "partner",
    "女友": "partner",
    "未婚夫": "partner",
    "未婚妻": "partner",
    "婆婆": "mother_in_law",
    "岳母": "mother_in_law",
    "丈母娘": "mother_in_law",
    "公公": "father_in_law",
    "岳父": "father_in_law",
    "老丈人": "father_in_law",
    "舅舅": "uncle",
    "叔叔": "uncle",
    "伯伯": "uncle",
    "姑姑": "aunt",
    "阿姨": "aunt",
    "小姨": "aunt",
    "表哥": "cousin",
    "表姐": "cousin",
    "表弟": "cousin",
    "表妹": "cousin",
    "堂哥": "cousin",
    "堂姐": "cousin",
    "侄子": "nephew",
    "外甥": "nephew",
    "侄女": "niece",
    "外甥女": "niece",
    "邻居": "neighbor",
    "医生": "doctor",
    "师父": "mentor",
    "房东": "landlord",
}
EN_RELATIONS: dict[str, str] = {
    "son": "son",
    "daughter": "daughter",
    "kid": "child",
    "kids": "children",
    "child": "child",
    "children": "children",
    "wife": "wife",
    "husband": "husband",
    "partner": "partner",
    "spouse": "spouse",
    "boyfriend": "partner",
    "girlfriend": "partner",
    "mom": "mother",
    "mum": "mother",
    "mother": "mother",
    "dad": "father",
    "father": "father",
    "brother": "brother",
    "sister": "sister",
    "friend": "friend",
    "colleague": "colleague",
    "coworker": "colleague",
    "co-worker": "colleague",
    "boss": "boss",
    "manager": "manager",
    "supervisor": "boss",
    "accountant": "accountant",
    "lawyer": "lawyer",
    "doctor": "doctor",
    "gp": "doctor",
    "dentist": "dentist",
    "roommate": "roommate",
    "flatmate": "roommate",
    "neighbor": "neighbor",
    "neighbour": "neighbor",
    "teammate": "teammate",
    "business partner": "business_partner",
    "therapist": "therapist",
    "advisor": "advisor",
    "mentor": "mentor",
    "cofounder": "cofounder",
    "co-founder": "cofounder",
    "landlord": "landlord",
    "parents": "parents",
    "grandma": "grandparent",
    "grandpa": "grandparent",
    "grandmother": "grandparent",
    "grandfather": "grandparent",
    "mother-in-law": "mother_in_law",
    "father-in-law": "father_in_law",
    "sister-in-law": "sister_in_law",
    "brother-in-law": "brother_in_law",
    "in-laws": "in_laws",
    "aunt": "aunt",
    "uncle": "uncle",
    "cousin": "cousin",
    "niece": "niece",
    "nephew": "nephew",
    "stepson": "son",
    "stepdaughter": "daughter",
    "fiance": "partner",
    "fiancé": "partner",
    "fiancee": "partner",
    "fiancée": "partner",
}

MALE_RELATIONS = frozenset(
    ("brother", "brother_in_law", "father", "father_in_law", "husband", "nephew", "son", "uncle")
)
FEMALE_RELATIONS = frozenset(
    ("aunt", "daughter", "mother", "mother_in_law", "niece", "sister", "sister_in_law", "wife")
)
PLURAL_RELATIONS = frozenset(("children", "parents", "in_laws", "grandparent"))
"""Which relations "him", "her" / 她 can be, and which name more than one person (`extract._resolve_pronouns`)."""

ONE_AT_A_TIME: dict[str, str] = {
    "boss": "boss",
    "manager": "boss",
    "supervisor": "boss",
    "partner": "partner",
    "spouse": "partner",
    "wife": "partner",
    "husband": "partner",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "fiance": "partner",
    "fiancee": "partner",
    "landlord": "landlord",
    "therapist": "therapist",
    "advisor": "advisor",
}
"""Relations a person has one of at a time, by the relation (or a key's word for it) → which one: a new manager
is the end of the old one's being the manager, where a new friend is one more friend."""
# Verbs that make a capitalised clause subject a person ("Priya runs on-call", "Tomasz is our EM").
EN_PERSON_VERBS = re.compile(
    r"^(?:runs|owns|manages|leads|joined|just joined|works|handles|teaches|reports|writes|maintains|"
    r"is (?:our|my|the|a|an|allergic|in)|has|loves|hates|"
    r"likes|takes|plays|goes|studies|covers|does|won't|can't|"
    r"doesn't|is \d|'s (?:our|my|the|a|an|\d)|"
    # what happened to them ("Tom got promoted", "Sarah just started at Google", "Priya moved to Leeds")
    r"(?:just |finally |recently |also |still )?(?:got|was|has been|had|started|began|quit|left|moved|joined|"
    r"switched|retired|sold|bought|lost|won|passed|graduated|became))\b"
)
ZH_SURNAMES = set(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔"
    "钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
ZH_PERSON_VERBS = re.compile(
    r"^(?:负责|在|是|管|写|做|用|每|有|对|也|比较|喜欢|不|上|读|会|刚|主要|一直|"
    # what happened to them ("小王升职了", "老李最近在学吉他", "小张已经辞职了")
    r"升职|升了|最近|已经|开始|换了|辞职|离职|结婚|退休)"
)
# Characters that end a Chinese name after a relation word (我儿子乐乐 7 岁 → 乐乐).
ZH_NAME_STOP = set("是在有对每今也都很就要会说喜不的了和跟去上读得比最从想吃把被叫一两三四五六七八九十个岁年月")

# --- transient, request, question, small talk ---------------------------------------------------------

ZH_TIME_TRANSIENT = re.compile(
    r"今天|明天|后天|昨天|前天|今晚|明晚|昨晚|昨夜|今早|明早|刚才|刚刚|上个?周末|这会儿|此刻|这周|(?<!日)本周|下周|这个周末|这周末|待会|等会|"
    # this week, this month or quarter, as "this week" and "this month" are in English; not the month a change starts
    # from ("从这个月开始", as "starting this month"). Not 下个月 either: a date ahead often comes with what lasts
    # ("下个月考雅思" says the user is preparing for it; "买的房下个月交房" that they bought a home).
    # (`timeref.ZH_THIS`: not 本 of 日本, "日本月薪"; `ZH_NOT_MONTH_WORD`: not 月 opening a word, "这个月饼")
    + ZH_THIS
    + r"(?:星期|礼拜)(?![一二三四五六日天])|"
    + ZH_THIS
    + r"(?:月"
    + ZH_NOT_MONTH_WORD
    + r"|季度)(?!份?(?:开始|起))|"
    # a day of the week, not a weekly one ("周五部门聚餐", "下周三面试"; not "每周五游泳", "每个星期六", "周末"), nor
    # the day a liking names ("我最喜欢星期五")
    r"(?<![每逢一两三几])(?<!每个)(?<!每到)(?<!一般)(?<!通常)(?<!平时)(?<!经常)(?<!常常)(?<!一般在)(?<!喜欢)(?<!爱)(?<!讨厌)"
    r"(?:周|星期|礼拜)[一二三四五六日天](?![一二三四五六日天]*(?:都|一般|通常|常常|经常))|"
    r"这几天|这两天|前几天|前两天|(?:到|至|直到)\s*(?:\d{1,2}\s*[号日]|月底|周末|下周|下个月)|"
    # (马上 "at once", not the 马 that ends a word: "开宝马上班", "骑马上学", "野马上山")
    r"一会儿|(?<![野骑赛斑木黑白宝罗战兵出驸汗铁])马上|这次|这回|在(?:火车|地铁|飞机|车|路)上|出差中|报错|一直报|出错|失败|卡住|坏了|"
    # a stop-gap, as "temporarily" / "for now" in English ("暂时住我姐家", "临时在咖啡馆办公"; not a temp job, 临时工)
    r"暂时|临时(?!工)|"
    # a thing that will not start, open or connect ("lsp 死活起不来", "网页打不开", "vpn 连不上")
    r"(?:起|打|连|装|跑|登|启动|加载)不(?:来|开|上|起来|进去)|"
    # an acute illness passes ("我感冒了"); a cold medicine one is allergic to does not
    r"感冒(?!药)|流感(?!疫苗)|发烧|发热|咳嗽|嗓子疼|喉咙(?:疼|痛)|拉肚子|着凉|中暑|"
    # how far along something is: a streak or a count reached ("打卡第十天", "写到第三章", "连续跑了20天"), a share
    # done or left ("完成 70%", "还差一半"); the next count replaces it
    r"第\s*[零〇一二两三四五六七八九十百千\d]+\s*(?:天|周|章|节|课|关|集|篇|页|轮)|"
    r"连续[^，,。；]{0,6}?[零〇一二两三四五六七八九十百千\d]+\s*(?:天|周|个月)|"
    r"(?:完成|做完|写完|达成|进度)(?:了|到)?\s*(?:\d+(?:\.\d+)?\s*[%％]|[一二三四五六七八九十]成|一半)|还差\s*(?:一半|\d)|"
    # a level a measure has just reached ("goroutine 数涨到了几十万", "体重掉到 60 公斤", "延迟飙到 900ms"): the next
    # reading replaces it. Chinese only: English often glues such a reading to a fact without a clause break ("I work
    # at Shopify, latency went up to 900 ms"), which would drop the fact with it.
    r"(?:涨|降|跌|掉|升|增|减|飙|冲)(?:到|至)了?\s*[\d一二两三四五六七八九十百千万几]"
)
ZH_MOOD = re.compile(
    r"累|烦|着急|急死|难受|开心|高兴|无聊|郁闷|困|饿|紧张|焦虑|生气|头疼|头痛|发烧|不舒服|心情|哈哈|崩溃|"
    r"气死|闹心"
)
EN_TIME_TRANSIENT = re.compile(
    r"\btoday\b|\btonight\b|\btomorrow\b|\byesterday\b|"
    r"\bright now\b|\bat the moment\b|\bthis (?:afternoon|morning|"
    r"evening|weekend|week|saturday|sunday|monday|tuesday|"
    r"wednesday|thursday|friday)\b|\bnext week\b|\bjust now\b|"
    r"\b(?:hours?|minutes?) ago\b|\bon (?:saturday|sunday|monday|tuesday|wednesday|thursday|friday)\b|"
    r"\bgoing to sleep\b|\bfor now\b|\b(?:the )?(?:past|last) (?:few|couple of|two|three) days\b|"
    r"\bthis past week\b|\bthe other day\b|"
    r"\bthis time\b|\berror\b|\bfails?\b|\bfailing\b|\bbroken\b|"
    r"\bkeeps? \w+ing\b|\bdoesn't work\b|\bisn't working\b|\bcan't connect\b|"
    r"\b(?:a|the|this) (?:cold|flu|fever|stomach bug)\b(?! (?:shot|vaccine|medicine|meds))|\bsore throat\b|"
    r"\bcoughing\b|\bhungover\b|"
    # a near day ("next Friday", "last night"; not "last month": "got a dog last month" still holds), a few hours or
    # days from now, a visit, a delay, being stuck somewhere
    r"\b(?:next|last|this coming) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|night)\b|"
    r"\bnext month\b|\bin (?:an?|\d+|two|three|a few|a couple of) (?:hours?|minutes?|days?)\b|"
    r"\b(?:is|are|'s|'re|am|'m) (?:coming over|coming to visit|visiting)\b|"
    r"\b(?:got|get|was|been|is) (?:delayed|cancelled|canceled)\b|\bstuck (?:at|in|on)\b|"
    # how far along something is ("70% done", "a 12-day streak"); not "three weeks into my new job at Stripe",
    # whose clause also says where the user works (Chinese says such things in a clause of their own)
    r"\b\d+\s?% (?:done|complete|through|finished)\b|\b\d+[- ]day streak\b|"
    # a state that has held all day ("my sugar's been running high all day"; not "I sit at a desk all day", a
    # habit), for the time being, this month, a day of this month ("a gig on the 14th"; not "on the 1st of every
    # month", "on the 3rd floor"), a near due day ("by thursday", "by end of day"), a mark in a test ("got a 54 on
    # my midterm")
    r"\b(?:been|was|were)\b[^.,;!?]{0,30}?\ball (?:day|night|morning|afternoon|evening)\b|"
    r"\btemporarily\b|\bfor the time being\b|(?<!starting )(?<!from )(?<!as of )\bthis (?:month|sprint|quarter)\b|"
    r"\b(?:on|by) the \d{1,2}(?:st|nd|rd|th)\b(?! of (?:each|every) month)(?! (?:floor|grade|place|row|time|century|"
    r"birthday|anniversary|edition|day|week|year|attempt|try|round|street|avenue|percentile)\b)|"
    r"\bby (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|eod|eow|"
    r"(?:the )?end of (?:the |this )?(?:day|week))\b|"
    r"\b(?:got|scored|received|getting) (?:an? )?\d+(?:\.\d+)?\s?%? (?:on|in) (?:my|the|our|this|that)\b",
    re.I,
)
ZH_JUST_DONE = re.compile(
    r"刚刚?(?:从[^，,。；;]{1,10}?)?"
    r"(?:(?<![搬调转])(?:回来|回到家|到家)|下了?(?:[早中晚夜白]?班|课|飞机|高铁|火车)|起床|睡醒"
    r"|(?![搬修读学还生结离建盖买卖换装转改迁升调刚])[\u4e00-\u9fff]完)"
)
"""Just back, just off, just up, just done ("刚下夜班", "刚从健身房回来", "刚考完"): an outing or a task that has
ended, whose aftermath is of the moment. Not a move back ("刚从北京搬回来", "调回来"), nor what is done once and
lasts ("刚搬完家", "刚还完房贷", "刚生完孩子", "刚买完房", "刚读完研"), nor a change done ("刚换完手机", "刚装完 Linux",
"刚转完专业"): what it changed to holds."""
EN_JUST_DONE = re.compile(
    r"\bjust (?:got|gotten|came) (?:back\b(?! together)(?! from (?:living|working|studying|teaching|serving)\b)|home\b"
    r"|off (?:the (?:phone|plane|train|bus)|a call)\b)|\bjust woke up\b",
    re.I,
)
"""The same in English ("just got back from the gym", "just got off the plane", "just woke up"); not "got back
together", nor back from years lived or worked somewhere. Not "just got off work" either: it goes on to say the
job ("…off work as a museum guide", "…off my shift at the hospital")."""
HABITUAL = re.compile(r"每|经常|常常|总是|通常|一般|平时|\bevery\b|\busually\b|\balways\b|\boften\b", re.I)
"""A habit said of such an ending ("每天刚下班就去健身房") is no moment."""
STATES_AGE = re.compile(r"[\d一二三四五六七八九十两]+\s*岁|\b\d+(?:st|nd|rd|th) birthday\b", re.I)
"""An age said with such an ending ("刚过完30岁生日"): the age holds."""
WITH_MINE = re.compile(r"\bwith (?:my|our)\b|带着?|陪着?|(?:和|跟)(?:我家|我们家|我的)", re.I)
"""Such an ending said with someone of the user's ("just got home from the hospital with our newborn", "刚带狗从宠物医院
回来"): the outing passes, but whom it names is the user's, and the clause is read for them."""
ACUTE_ILLNESS = re.compile(
    r"\b(?:chest|ear|eye|sinus|throat|kidney|bladder|urinary|tooth|gum|skin|wound|yeast|stomach|lung|bacterial|viral"
    r"|nasty|bad|an|the|a)\s+infection\b(?! (?:control|prevention|disease|risk))|\bfood poisoning\b|\bnorovirus\b"
    r"|\bstomach (?:flu|bug)\b|\bstrep(?: throat)?\b|\btested positive\b"
    r"|\b(?:have|has|'ve|got) covid\b(?! (?:vaccine|jab|shot|booster))|\bpink ?eye\b|"
    r"(?<!慢性)(?:咽喉|喉咙|嗓子|扁桃体|牙龈|伤口|眼睛|肠胃)?发炎|食物中毒|(?<!慢性)肠胃炎|牙疼|牙痛|落枕"
    r"|(?:扭|崴)(?:到|伤)了?(?:脚|腰|手)|(?:^|(?<=[我他她也又都家]))阳了",
    re.I,
)
"""An acute illness or a small injury ("a chest infection", "food poisoning", "嗓子发炎", "落枕", "我阳了"): it passes
as a cold does (`EN_TIME_TRANSIENT` / `ZH_TIME_TRANSIENT` name the cold and the fever). Not a city that ends in 阳
("搬去沈阳了"), nor infection control as a job."""
CHRONIC = re.compile(
    HABITUAL.pattern + r"|\bprone\b|\bchronic|\brecurr|\bkeep getting\b|\blong covid\b|\bsince (?:i was|childhood)\b"
    r"|慢性|容易|老是|从小",
    re.I,
)
"""What makes such an illness the user's lasting condition: a habit's words, or "prone to ear infections", "慢性咽炎",
"老是牙龈发炎"."""
EN_MOOD = re.compile(
    r"\btired\b|exhausted|stressed|\bbored\b|\bhungry\b|\bsick\b|annoyed|frustrated|\bin a hurry\b|"
    r"sleepy|\bugh\b|\blol\b|\bhaha\b|\bwhoa\b|\bcurious\b|anxious|\bupset\b|\bexcited\b|\bmood\b",
    re.I,
)
ZH_REQUEST = re.compile(
    # "给我同事的书店做的…" is for the user's colleague, not "give me": 给我 before a relation is no request.
    r"^(?:你)?(?:帮我|帮忙|请你?|麻烦|给我(?!"
    + "|".join(ZH_RELATIONS)
    + r")|你帮|你给|推荐|列一下|列个|写个|写一|写条|写封|写段|看看|看下|看一下|查一下|"
    r"查查|搜一下|搜搜|算一下|翻译|改一下|改成|订|打开|读一下|顺便帮|能不能|可不可以|能否|想问|问下|问一下|告诉我|"
    r"说说|讲讲|讲个|来个|再来|再写|再改|再搜|再看|总结|解释一下|比较一下)|"
    # a proposal to the partner, the Chinese "let's": "咱们聊点别的", "我们换个话题", "让我们谈谈…"
    r"^(?:让我们|咱们|我们)(?:来|就|先)?(?:换个|换一个|聊聊|聊点|谈谈|说说|讨论一下|来聊)|"
    r"^给我(?=[写列发做找推荐看讲说来一])|(?:一点|一些|点儿)$|^再.{1,6}点$|(?:就行|就好|即可)$"
)
EN_REQUEST = re.compile(
    r"^(?:(?:ok|okay|so|and|also|now|hey|hi|quick q|"
    r"quick question)[,:]?\s+)?(?:can you|could you|would you|will you|please|"
    r"pls|help me|give me|write|make|show|tell me|let's|convert|draft|add|swap|remove|pull up|check|find|"
    r"summari[sz]e|explain|suggest|list|translate|fix|generate|read|compare|recommend|plan|create|build me|"
    r"send|book|update|look up|search|"
    # what to put in or how to shape something being written ("mention I led the redesign", "keep it under 300
    # words", "include my GitHub link"); not "keep a journal", which is a habit
    r"mention|include|highlight|emphasi[sz]e|rephrase|reword|shorten|proofread|polish|keep (?:it|this|that|them)|"
    r"any tips|what's|whats|here's|here is|"
    r"(?:i )?(?:need|want|would like|'d like) (?:some )?(?:help|advice|ideas|tips|a hand)|"
    r"(?:i'm |i am )?looking for (?:some )?(?:help|advice|ideas|tips|a way))\b",
    re.I,
)
ZH_QUESTION = re.compile(
    # 嘛 closes a statement as often as not ("我广州人嘛", "你懂的嘛"): a question only in 干嘛/搞嘛
    r"[?？]$|[吗呢么]$|(?:干|搞|弄)嘛$|[吗呢][~～。!！]*$|^(?:怎么|怎样|为什么|为啥|什么|哪|多少|几|是否|有没有|要不要|会不会|是不是|能不能)|对吧$|好不好$|行不行$"
    # a verb asked as "A-not-A" anywhere in the clause: "我是不是该学 rust 啊", "周末要不要带伞"
    r"|是不是|要不要|该不该|能不能|可不可以|会不会|需不需要|值不值得|适不适合|用不用|算不算|有没有(?!有)"
    # any word asked as A-not-A ("贵不贵", "难不难啊", "去没去过"); not the adverbs 时不时 / 动不动, nor "不错不错"
    r"|(?<!不)(?<!没)(?P<asked>[\u4e00-\u9fff])(?<![时动])[不没](?P=asked)"
    # a pick between two asked with a closing particle and no mark ("周末去爬山还是看电影啊", "选红的还是白的呢"):
    # 还是 between the two, not "still" / "after all" (after a pronoun or 也/都/就, at the start, before an adverb or
    # with a negation after it: "我还是喜欢猫啊", "还是家里好啊", "等了三天还是没到啊", "住了五年还是吃不惯啊")
    r"|(?<=[^\s，,。我你他她它们也都就还要])还是"
    r"(?!很|挺|有点|有些|不|没|会|能|那么|这么|老|一直|要|得|蛮|太|特别|非常|比较|一样|照样|觉得|喜欢|想|在|是)"
    r"(?![^，,。]*[不没])[^，,。；;！!？?\s]{1,8}[啊呀呢吖][~～。!！]*$"
    # asking for a way or a pick without a question mark ("有啥办法把…导成 markdown", "在家能练点啥")
    r"|(?:有啥|有什么|有没有)(?:办法|方法|推荐|建议|好的?|技巧|窍门)|^有啥|(?<![没])(?:啥|什么)[呢啊呀]?$"
    # a question with no question mark, its question word inside: "换什么狗粮比较好", "选哪个合适", "咋办"
    r"|(?:什么|哪[个种家款些里]|怎么|咋).{0,12}(?:比较)?(?:好|合适|划算|靠谱)$|(?:怎么|咋)办$"
    # a question word for an amount at the end, where Chinese asks ("大概还剩多少", "要等多久"); not 几, which
    # also says "several" ("我已经退休了几年", "每周锻炼几次")
    r"|(?:多少钱?|多久|多长时间|(?<!差不)多大|多远|多高|多重)[啊呀呢]?$"
    # a yes-no question asked with a closing 不 after a modal or a verb ("狗能吃西葫芦不", "好吃不"); not "我一般不"
    r"|(?:能|会|要|可以|好|行|对|有|该)[^，,。]{0,8}不$"
)
ZH_TRAILING_LAUGH = re.compile(r"(?:(?<!嘻)哈{2,}|呵{2,}|嘿{2,}|嘻{2,}|h{3,}|2333*)[~～!！。.\s]*$", re.I)
"""Laughter that closes a clause ("能吃惯不哈哈"): it hides a question's closing particle from the tests that
read the clause's end (not 嘻哈, hip-hop)."""
EN_QUESTION = re.compile(
    r"\?$|^(?:how|what|why|which|who|where|when|is it|is that|"
    r"are there|is there|should i|do you|does|did|can i|"
    r"any (?:tips|ideas|suggestions)|would it)\b",
    re.I,
)
ZH_SMALLTALK = re.compile(
    r"^(?:在吗|你好|您好|嗨|哈+|嗯+|好+的?|行吧?|可以|谢谢|感谢|多谢|拜拜|再见|晚安|不用了|没事|好吧|收到|明白|了解|知道了|"
    r"不错|太好了|原来如此|对|是的|没错|好消息|(?:先|暂时|还)?不用(?:了|啦)?|(?:先|暂时)?不需要(?:了|啦)?)[!！。~～]*$"
    r"|^(?:谢谢|感谢|多谢)(?:你|您)"  # thanks to the partner for something: nothing about the speaker
)
EN_GREETING_TO = (
    r"(?:hi|hello|hey|hiya|howdy|dear)[,!]?\s+(?!(?:user|person|speaker)\b)(?-i:[A-Z][a-z]+)(?:\s+(?-i:[A-Z][a-z]+))?"
)
"""A greeting to someone named ("Hi Larry", "Hello John"): said to them, nothing about the speaker."""
EN_SMALLTALK = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ty|ok|okay|cool|great|nice|perfect|good|done|sure|bye|good night|"
    r"have a good (?:night|day)|yes|yeah|yep|no|nope|got it|sounds good|lol|haha|whoa|wow|oh|ah|"
    r"that's it|nice one)[.!]*$"
    # thanks for something: gratitude names what the other did, nothing about the speaker
    # (unless a clause of the speaker's own follows unmarked: "thanks for the tip i'm vegan btw")
    r"|^(?:thanks|thank you|thx|many thanks)(?: (?:so|very) much)?(?: again)? for\b(?!.*\b(?:i|i'm|im|i've|ive|we)\b)"
    rf"|^{EN_GREETING_TO}[.!]*$",
    re.I,
)
# A standing instruction survives the request filter: it is meant to hold beyond this conversation.
# "每次 … 都": the gap may not contain its own opener, so each opener scans only up to the next one; with
# `.*` every "要是" of a long line rescanned the rest of it (quadratic: 32,000 chars took ~0.5 s). Only
# ever used as a yes/no test, where the two agree (the nearest opener before the closer matches).
ZH_STANDING = re.compile(
    # "以后" after a verb done ("走了以后", "下班之后") says when, not from now on
    r"(?<![了之过完])以后|今后|从今以后|从现在起|从现在开始|往后|默认|一律|每次(?:(?!每次).)*都|总是|永远|一直都|"
    r"如果(?:(?!如果).)*提醒|要是(?:(?!要是).)*提醒|每当"
)
EN_STANDING = re.compile(
    r"\bfrom now on\b|\bgoing forward\b|\bin future\b|"
    r"\bin the future\b|\bfor future\b|\balways\b|\bwhenever\b|"
    r"\bevery time\b|\bby default\b|\bif it \w+s?, remind\b|\bif .{1,40}remind me\b|"
    r"\bnever (?:use|call|send|give|suggest|list|recommend|add|write|cc)\b|"
    # the form of every answer to come: "when you give me recipes, …", "keep your answers short"
    r"\bwhen(?:ever)? you (?:give|send|write|suggest|recommend|show|make|answer|reply|explain)\b|"
    r"\b(?:keep|make)\b(?:(?!\b(?:it|this|that)\b)[^.?!]){0,15}\b(?:answers|replies|responses|explanations)\b",
    re.I,
)
ZH_REMEMBER = re.compile(r"^(?:请)?(?:记住|记一下|记下|记得|帮我记住|你记住|备注一下)[:：，,]?\s*")
EN_REMEMBER = re.compile(
    r"^(?:please )?(?:remember(?: that)?|keep in mind(?: that)?|note that|for the record|for context|"
    r"fyi|btw|just so you know)[,:—\-]?\s*",
    re.I,
)
ZH_REPEAT = re.compile(r"说过|跟你说过|讲过好几次|提过")
EN_REPEAT = re.compile(r"\btold you\b|\bsaid (?:this|that) before\b", re.I)
ZH_DISCOURSE = re.compile(
    # "那"/"对"/"行"/"好" open a sentence as fillers, and words as well ("那个小程序", "对面", "行尸走肉", "好吃的",
    # "对我来说"): "好的" is a filler; "好", "行" and "对" alone only before a pause; "那个，" before a pause too;
    # "那是…" is "that is", not "so, (I) am".
    r"^(?:嗯+|哦+|噢|啊|哈+|好的|(?:好|行|对+)(?:吧|啊|呀|的)?(?=[，,。！!：:\s~～]|$)|对了|另外|其实|"
    # "还有，…" / "还有我…" is "and also"; "还有哮喘" is "(I) also have asthma": the verb stays.
    r"还有(?=[，,。！!：:\s~～]|$|[我你他她咱就呢啊哦个一])|"
    r"顺便说一下|顺便|先说一下|先说|"
    # "不过敏" (not allergic) is no "不过" (but), and "不是经理" is a denial, not the filler "不是，…" (no, …).
    r"[跟和]你说(?:一下|个事|件事)?|告诉你(?:个事|件事|一件事)?|说一下|补充一下|然后|所以|不过(?!敏)|"
    r"但是|那个(?=[，,])|那(?![个些么样种里边儿时会是])|就是|反正|总之|话说|是的|没错|"
    r"不是(?=[，,。！!：:\s]|$))[，,。！!：:\s]*"
)
EN_DISCOURSE = re.compile(
    # "no" is an interjection only before a stop or before another interjection: "no dairy" denies dairy.
    r"^(?:ok|okay|oh|ah|so|also|and|but|actually|well|yeah|yes|yep|no(?=[,.!:;—\-]|\s+(?:no|yeah|i|i'm|it|that|"
    r"sorry|thanks|not|way)\b)|nope|btw|anyway|right|hmm|great|good|"
    r"nice|thx(?!\s+for\b)|thanks(?!\s+for\b)|oh nice|haha|lol|ugh|not me|two things|one more thing|quick thing|"
    r"first)[,.!:;—\-]*\s+",
    re.I,
)

# Trailing asides that carry nothing ("…, by the way", "…顺便说一句").
# The separator run is entered at its start only (the look-behind): retried from each of its positions, a
# long run of spaces or commas backtracked for minutes. Same matches, linear.
EN_DISCOURSE_TAIL = re.compile(
    r"(?<![,\s])[,\s]+(?:by the way|btw|fyi|just so you know|if that matters|I think|I guess|I believe|for sure|"
    r"actually)\s*$",
    re.I,
)
ZH_DISCOURSE_TAIL = re.compile(r"(?:(?<![，,\s])[，,\s]+)?(?:顺便说一句|顺便一提|跟你说一下)\s*$")

# One-off plans and wishes: transient unless the clause also names a stable attribute.
ZH_PLAN = re.compile(r"^(?:想|打算|准备|计划|要不)")
EN_PLAN = re.compile(
    r"^(?:i'm going to|i'm planning|planning to|(?:i )?want to|(?:i )?wanna|i'd like to|gonna)\b", re.I
)
# Nationalities and languages are capitalised but are not names ("I'm British").
EN_NOT_NAME_WORDS = frozenset(
    [
        "British",
        "English",
        "American",
        "Chinese",
        "Canadian",
        "French",
        "German",
        "Spanish",
        "Italian",
        "Japanese",
        "Korean",
        "Indian",
        "Australian",
        "Irish",
        "Scottish",
        "Dutch",
        "Swiss",
        "Mexican",
        "Brazilian",
        "Russian",
        "Vegan",
        "Vegetarian",
        "Here",
        "Back",
        "Done",
        "Fine",
        "Sure",
        "Not",
        "Also",
        "Still",
        "Just",
        "Currently",
        "Pretty",
        "Really",
        "Very",
        "Always",
        "Never",
        "Going",
        "Trying",
        "Working",
        "Looking",
        "Based",
        "Learning",
        "Using",
    ]
)
