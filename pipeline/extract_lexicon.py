"""Cue-word lexicons for the offline extractor, Chinese and English.

These are general vocabularies (identity, stack, habits, preferences, transient states), written once
and never tuned to a particular conversation. Each attribute maps a clause to a key suffix and a kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.pipeline import MemoryKind


@dataclass(frozen=True)
class Attribute:
    name: str
    """Key suffix, e.g. `city` → `user.city`. A trailing `*` asks for a salient noun: `preference.*`."""
    kind: MemoryKind
    zh: re.Pattern[str] | None
    en: re.Pattern[str] | None


def _zh(words: str) -> re.Pattern[str]:
    return re.compile(words)


def _en(words: str) -> re.Pattern[str]:
    return re.compile(words, re.I)


K = MemoryKind

_ZH_JOBS = (
    "工程师|程序员|开发者|经理|主管|总监|组长|老师|教师|护士|医生|设计师|律师|会计|研究员|学生|研究生|博士|测试|"
    "运营|销售|分析师|管理员|创始人|老板|助理|QA"
)

# Ordered: the first attribute whose cue matches a clause names it. Specific before generic.
ATTRIBUTES: list[Attribute] = [
    Attribute(
        "name",
        K.profile,
        _zh(r"我叫|我的名字|名字是|名字叫|叫我|称呼我|我姓"),
        _en(r"\bmy name(?:'s| is)\b|\bcall me\b|\bi go by\b|\bi'm called\b|\bsign as\b"),
    ),
    Attribute("allergy", K.fact, _zh(r"过敏"), _en(r"allerg")),
    Attribute(
        "diet",
        K.preference,
        _zh(r"吃素|素食|蛋奶素|忌口|清真|不吃肉|吃辣|不吃辣|不能吃|吃海鲜|不吃|素"),
        _en(
            r"vegetarian|vegan|pescatarian|pescetarian|\beats? (?:meat|fish|pork|beef|dairy|eggs|seafood)\b|"
            r"\bno (?:meat|fish|pork|beef|dairy)\b|gluten|lactose|\bketo\b|halal|kosher|spicy|\bdiet\b|"
            r"(?:don't|won't|can't|never) eat"
        ),
    ),
    Attribute(
        "drink",
        K.preference,
        _zh(r"喝茶|喝咖啡|喝酒|不喝|[红绿白黑花]茶|乌龙|普洱|咖啡|奶茶|啤酒|白酒|红酒|喝"),
        _en(r"\bdrinks?\b|\bdrinking\b|coffee|\btea\b|alcohol|\bbeer\b|\bwine\b|sober"),
    ),
    Attribute("smoking", K.habit, _zh(r"戒烟|抽烟|吸烟|烟"), _en(r"\bsmok|\bvap(?:e|ing)\b|cigarette")),
    Attribute(
        "health",
        K.fact,
        _zh(r"高血压|糖尿病|哮喘|吃药|服药|药物|受伤|手术|病史|慢性"),
        _en(r"medication|diagnosed|blood pressure|diabet|asthma|injur|surgery|chronic|\bpills?\b"),
    ),
    Attribute(
        "schedule",
        K.habit,
        _zh(r"早班|夜班|晚班|白班|倒班|作息|起床|补觉|睡觉|点到|点以后|点之后|点前"),
        _en(
            r"\bshifts?\b|\bwake up\b|\bsleep\b|\boffline\b|"
            r"\bwork (?:from )?\d|\b\d{1,2} ?(?:am|pm)?\s?to\s?\d"
        ),
    ),
    Attribute(
        "exercise",
        K.habit,
        _zh(r"跑步|晨跑|夜跑|游泳|健身|瑜伽|骑车|骑行|爬山|徒步|羽毛球|篮球|足球|网球|乒乓|运动|锻炼|公里|跑"),
        _en(
            # "runs the release schedule" / "is run by" are not exercise.
            r"\brun(?:s|ning)?\b(?!\s+(?:the|our|my|a|an|his|her|their|this|that|it|by)\b)"
            r"(?<!is run)(?<!are run)(?<!was run)|"
            r"\bjog|\bswim|\bgym\b|yoga|\bcycl(?:e|ing)\b|\bbik(?:e|ing)\b|\bhik(?:e|ing)\b|"
            r"workout|exercise|\bclimb|tennis|badminton|soccer|football|basketball|marathon|\blift(?:ing)?\b"
        ),
    ),
    Attribute(
        "hobby",
        K.habit,
        _zh(
            r"吉他|钢琴|小提琴|画画|绘画|摄影|乐器|唱歌|下棋|钓鱼|书法|手工|烘焙|爱好|陶艺|跳舞|舞蹈|园艺|露营|编织|素描"
        ),
        _en(
            r"guitar|piano|violin|drums|painting|photograph|knit|\bchess\b|fishing|hobby|hobbies|baking|"
            r"\bplay(?:s|ing)? (?:the )?(?:guitar|piano|violin|drums|electric|bass)|"
            r"pottery(?! (?:shop|store|business|studio))|\bdanc(?:e|es|ing)\b|\bdrawing\b|sketching|gardening|"
            r"camping|crochet|sewing|calligraphy|woodworking"
        ),
    ),
    Attribute(
        "reading",
        K.preference,
        _zh(r"看书|读书|小说|阅读|诗集|作家"),
        _en(r"\bbooks?\b|\bnovels?\b|\breading\b|\bauthor\b|\bpoetry\b|\bpoems?\b"),
    ),
    Attribute(
        "music",
        K.preference,
        _zh(r"音乐|听歌|乐队|演唱会|歌手|专辑"),
        _en(r"\bmusic\b|\bsongs?\b|\bbands?\b|\bconcerts?\b|\bsinging\b|\balbums?\b|\bmusicians?\b|\bsinger\b"),
    ),
    Attribute(
        # What the user means to become: "I want to be a counselor", "我的梦想是开一家书店".
        "goal",
        K.profile,  # a life goal holds for years, not a project's weeks
        _zh(r"梦想|目标是|想成为|想当|打算当|立志"),
        _en(
            r"\bmy (?:dream|goal|aim) is\b|\bi(?:'m| am) (?:hoping|planning|aiming) to become\b|"
            r"\bi (?:want|hope|plan) to (?:become|be an? \w+er\b|work (?:in|as))|"
            r"\bi'd love to (?:become|work (?:in|as))\b"
        ),
    ),
    Attribute(
        "hometown",
        K.profile,
        _zh(r"老家|家乡|来自|出生在|土生土长"),
        _en(r"originally from|\bi'm from\b|\bi am from\b|hometown|grew up in|born in"),
    ),
    Attribute(
        "city",
        K.profile,
        _zh(r"住在|住|家在|搬到|搬来|搬过来|搬家|定居|坐标|常驻"),
        _en(
            r"\blives? in\b|\bliving in\b|\bbased in\b|\bmoved to\b|"
            r"\bmove to\b|relocat|\blived here\b|\bmy address\b"
        ),
    ),
    Attribute(
        "employer",
        K.profile,
        # A hospital or school is where the user works only when the user is there ("在市一院上班"), not when
        # something was made for one ("给表姐的牙科医院做的排班系统").
        _zh(r"公司|单位|入职|跳槽|上班|就职|任职|在.{0,10}(?:医院|学校)|在.{1,12}工作"),
        _en(
            r"\bwork(?:s|ing)? (?:at|for)\b|employer|(?<!'s )\bcompany\b|"
            r"startup|\bstarted at\b|\bjoined\b|\bmy job\b|\bfirm\b"
        ),
    ),
    Attribute(
        "role",
        K.profile,
        _zh(
            # A job noun names the user's role when the user is it ("我是/当/做…", "…组的组长"),
            # not when it is someone else in the sentence ("医生开了药").
            r"(?:是|当|做|作为|^我)[^，,。]{0,10}(?:" + _ZH_JOBS + r")|的(?:" + _ZH_JOBS + r")$|"
            r"自由职业|独立开发|研[一二三](?![十百千万])|博[一二三四五]|"
            r"[读是我]大[一二三四](?![十百千万])|负责|做.{0,4}(?:测试|开发|设计|产品|运营|财务|审计|前端|后端|销售|咨询|翻译|研究|会计)|"
            r"是做.{1,8}的|当.{0,6}(?:老师|护士|医生|工程师|会计|律师)|主攻|方向是|专业"
        ),
        _en(
            r"\bi'm an? (?!(?:big |huge )?fan\b)\w|\bi am an? (?!(?:big |huge )?fan\b)\w|\bi work as\b|\bengineer|"
            r"developer|\bteach(?:er|ers|ing|es)?\b(?! (?:me|us|people|others|them|him|her|you)\b)|"
            r"\bnurse\b|designer|researcher|"
            r"translator|freelanc|\blead\b|manager|analyst|\badmin\b|student|founder|\bowner\b|consultant|"
            r"accountant|\bdev\b|\bdoctor\b|\bi run\b|\bi (?:\w+ )?own\b|\bi maintain\b|\bresponsible for\b|"
            r"\bmy role\b|\bteam\b|\breport to\b"
        ),
    ),
    Attribute(
        "os",
        K.preference,
        _zh(r"操作系统|windows|macos|linux|ubuntu|debian|fedora|wsl"),
        _en(r"\bwindows\b|\bmacos\b|\blinux\b|ubuntu|debian|fedora|\barch linux\b|\bwsl"),
    ),
    Attribute(
        "database",
        K.preference,
        _zh(r"数据库"),
        _en(
            r"postgres|mysql|sqlite|mongo|\bredis\b|oracle db|sql server|mariadb|clickhouse|"
            r"bigquery|database"
        ),
    ),
    Attribute(
        "editor",
        K.preference,
        _zh(r"编辑器|深色模式|浅色模式|暗色主题"),
        _en(
            r"\beditor\b|\bvim\b|neovim|emacs|vs ?code|intellij|"
            r"pycharm|webstorm|sublime|\bide\b|dark mode|light mode"
        ),
    ),
    Attribute(
        "device",
        K.fact,
        _zh(r"手机|电脑|笔记本|平板|显卡|路由器|宽带|nas|iphone|安卓机"),
        _en(
            r"iphone|android phone|\bpixel \d|galaxy|\blaptop\b|"
            r"macbook|ipad|tablet|\bgpu\b|\bnas\b|router|\bphone\b"
        ),
    ),
    Attribute(
        "language.programming",
        K.preference,
        _zh(r"编程语言"),
        _en(
            r"\bpython\b|golang|(?-i:\bGo\b)|\brust\b|\bjava\b|typescript|javascript|"
            r"\bts\b|\bjs\b|kotlin|\bswift\b|c\+\+|c#|\bruby\b|\bphp\b|\bscala\b|\bdart\b|elixir|haskell|"
            r"\bsql\b|typed code"
        ),
    ),
    Attribute(
        "stack",
        K.preference,
        _zh(r"框架|技术栈|云开发|SDK|sdk|支付(?:渠道|接口|用的|走的?)|托管在|部署在"),
        _en(
            r"react|\bvue\b|angular|svelte|next\.?js|nuxt|flutter|django|flask|fastapi|spring|(?-i:\bExpress\b)|express\.?js|\bnode\b|"
            r"pytest|\bjest\b|\bk8s\b|kubernetes|docker|terraform|"
            r"\baws\b|\bgcp\b|azure|vercel|heroku|\bs3\b|\bcdn\b|jupyter|latex|\bsdk\b|"
            r"framework|\bstack\b|\bpayments?\b.{0,40}\b(?:through|via|with)\b|payment (?:provider|processor|gateway)|"
            r"\bhosted (?:on|at|by|with)\b|\bdeployed (?:on|to)\b"
        ),
    ),
    Attribute(
        "answer_style",
        K.preference,
        _zh(r"回答|回复|答案|解释|格式|简洁|结论|用中文|用英文|语气|称呼|变量名|注释"),
        _en(
            # short/brief/detail only about answers ("keep it short"), not "life's too short", "a brief moment"
            r"spelling|\banswers?\b|\bexplain|\bformat\b|concise|\bbullets?\b|\bexamples?\b|\btone\b|\breply\b|"
            r"\b(?:keep (?:it|them|things|answers?|replies)|be|make (?:it|them)|stay) (?:short|brief)\b|"
            r"\b(?:short|shorter|brief|detailed|more|less) (?:answers?|replies|responses|explanations?|summar|version|"
            r"detail)|\bin (?:more |less |great )?detail\b|\blevel of detail\b"
        ),
    ),
    Attribute(
        "school",
        K.fact,
        _zh(r"读小学|读初中|读高中|上小学|上初中|上高中|幼儿园|年级|班主任"),
        _en(r"\byear \d+\b|\bgrade\b|\b\w+'s class\b|\bschool\b|kindergarten"),
    ),
    Attribute(
        "study",
        K.project,
        _zh(r"托福|考研|考试|备考|学习|在学|上课|课程|论文|开题|导师|[考学]"),
        _en(
            r"\bexam\b|toefl|\bgre\b|\bcourse\b|\bclasses\b|studying|"
            r"learning\b(?! (?:experience|curve|a ton|a lot|and|with|from)\b)|thesis|\bdegree\b"
        ),
    ),
    Attribute(
        "project.deadline",
        K.decision,
        _zh(r"之前必须|必须在|截止|上线|交稿|初稿|延到|推迟到|ddl|deadline"),
        _en(r"deadline|\bdue\b|\bship by\b|\blaunch\b|go live"),
    ),
    Attribute(
        "project",
        K.project,
        _zh(r"项目|在做|在开发|开发|小程序|app|App|网站|系统|开了家店|开店|网店|店铺"),
        _en(r"\bproject\b|\bbuilding\b|\bapp\b|website|side project|\bshop\b|\bstore\b|\bblog\b|\bservice\b"),
    ),
    Attribute(
        # Tools and products the user works with, when no specific attribute above named them.
        "tools.*",
        K.preference,
        _zh(r"(?:改用|换成|换到|迁移到|迁到|转到|在用|使用|用的是|一直用)|供应商|服务商|由.{1,12}(?:负责|运维|托管)"),
        _en(
            r"\b(?:i|we) (?:\w+ )?(?:use|uses|used|using|switched|moved|migrated|rely on|work with|adopted)\b"
            r"|\bswitched (?:from|to)\b|\bmigrated (?:from|to)\b"
            # who provides a service to the user ("our IT desk is run by …")
            r"|\b(?:is|are) (?:run|managed|handled|hosted|provided|maintained) by\b|\bprovider\b|\bvendor\b"
        ),
    ),
    Attribute(
        # What the user settled on, keyed by what it is about ("user.decision.riverpod"): two decisions about
        # different things never conflict. "那就换 Riverpod" / "let's go with Riverpod" answer a comparison.
        "decision.*",
        K.decision,
        _zh(r"决定|定下来|定了|那就(?:换成?|用|选|改用)|^就(?:换成?|用|选|改用)|选定"),
        _en(
            r"\bdecided\b|\bsticking with\b|\bgoing with\b|"
            r"\b(?:let's|we'll|I'll) (?:go with|stick with|switch to|move to|migrate to)\b"
        ),
    ),
    Attribute(
        "pet",
        K.fact,
        _zh(
            r"猫|狗|宠物(?!医院|店|用品|食品)|养了?[一两几]?[只条头匹]|仓鼠|兔子|鹦鹉|金鱼|乌龟|柯基|金毛|泰迪|哈士奇|柴犬|布偶|英短"
        ),
        _en(
            r"\bcats?\b|\bdogs?\b|\bpets?\b|\bkittens?\b|\bpupp(?:y|ies)\b|\bhamsters?\b|\brabbits?\b|"
            r"\bparrots?\b|\bturtles?\b|\bgoldfish\b|\b(?:beagle|labrador|retriever|poodle|corgi|terrier|husky)s?\b"
        ),
    ),
    Attribute(
        "preference.*",
        K.preference,
        _zh(r"喜欢|爱吃|爱看|讨厌|偏好|偏爱|受不了|最爱|不想|希望|想用|习惯用|首选"),
        # like/love/hate/enjoy/want only with a first-person subject: "I really love X" is a preference,
        # "true love is rare" and "love the colors!" are not.
        _en(
            r"\bprefer|can't stand|favou?rite|\bfave\b|\bfav\b|"
            r"\b(?:I'm|I am|we're) (?:a |such a )?(?:big |huge )?fans? of\b|"
            r"\b(?:I|we|I'd|we'd)\b(?:\s+[\w']+){0,3}?\s+"
            r"(?:like|love|hate|enjoy|enjoyed|loved|want|wanna)\b"
        ),
    ),
    Attribute(
        "habit.*",
        K.habit,
        _zh(r"每天|每周|每晚|每个|每两|每[一二三四五六日]|礼拜|一般|平时|通常|经常|总是|固定|一直"),
        _en(
            r"\bevery\b|\busually\b|\balways\b|\boften\b|\bdaily\b|\bweekly\b|"
            r"\bmost (?:days|mornings|weekends|\w+days)\b|\btypically\b"
        ),
    ),
]

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
}
# Verbs that make a capitalised clause subject a person ("Priya runs on-call", "Tomasz is our EM").
EN_PERSON_VERBS = re.compile(
    r"^(?:runs|owns|manages|leads|joined|just joined|works|handles|teaches|reports|writes|maintains|"
    r"is (?:our|my|the|a|an|allergic|in)|has|loves|hates|"
    r"likes|takes|plays|goes|studies|covers|does|won't|can't|"
    r"doesn't|is \d|'s (?:our|my|the|a|an|\d))\b"
)
ZH_SURNAMES = set(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔"
    "钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
ZH_PERSON_VERBS = re.compile(r"^(?:负责|在|是|管|写|做|用|每|有|对|也|比较|喜欢|不|上|读|会|刚|主要|一直)")
# Characters that end a Chinese name after a relation word (我儿子乐乐 7 岁 → 乐乐).
ZH_NAME_STOP = set("是在有对每今也都很就要会说喜不的了和跟去上读得比最从想吃把被叫一两三四五六七八九十个岁年月")

# --- transient, request, question, small talk ---------------------------------------------------------

ZH_TIME_TRANSIENT = re.compile(
    r"今天|明天|后天|昨天|今晚|明晚|今早|明早|刚才|刚刚|这会儿|此刻|这周|本周|下周|这个周末|这周末|本周末|待会|等会|"
    r"一会儿|马上|这次|这回|在(?:火车|地铁|飞机|车|路)上|出差中|报错|一直报|出错|失败|卡住|坏了"
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
    r"\bgoing to sleep\b|\bfor now\b|"
    r"\bthis time\b|\berror\b|\bfails?\b|\bfailing\b|\bbroken\b|"
    r"\bkeeps? \w+ing\b|\bdoesn't work\b|\bisn't working\b|\bcan't connect\b",
    re.I,
)
EN_MOOD = re.compile(
    r"\btired\b|exhausted|stressed|\bbored\b|\bhungry\b|\bsick\b|annoyed|frustrated|\bin a hurry\b|"
    r"sleepy|\bugh\b|\blol\b|\bhaha\b|\bwhoa\b|\bcurious\b|anxious|\bupset\b|\bexcited\b",
    re.I,
)
ZH_REQUEST = re.compile(
    # "给我同事的书店做的…" is for the user's colleague, not "give me": 给我 before a relation is no request.
    r"^(?:你)?(?:帮我|帮忙|请你?|麻烦|给我(?!"
    + "|".join(ZH_RELATIONS)
    + r")|你帮|你给|推荐|列一下|列个|写个|写一|写条|写封|写段|看看|看下|看一下|查一下|"
    r"查查|搜一下|搜搜|算一下|翻译|改一下|改成|订|打开|读一下|顺便帮|能不能|可不可以|能否|想问|问下|问一下|告诉我|"
    r"说说|讲讲|讲个|来个|再来|再写|再改|再搜|再看|总结|解释一下|比较一下)|"
    r"^给我(?=[写列发做找推荐看讲说来一])|(?:一点|一些|点儿)$|^再.{1,6}点$|(?:就行|就好|即可)$"
)
EN_REQUEST = re.compile(
    r"^(?:(?:ok|okay|so|and|also|now|hey|hi|quick q|"
    r"quick question)[,:]?\s+)?(?:can you|could you|would you|will you|please|"
    r"pls|help me|give me|write|make|show|tell me|let's|convert|draft|add|swap|remove|pull up|check|find|"
    r"summarize|explain|suggest|list|translate|fix|generate|read|compare|recommend|plan|create|build me|"
    r"send|book|update|look up|search|"
    r"any tips|what's|whats|here's|here is)\b",
    re.I,
)
ZH_QUESTION = re.compile(
    r"[?？]$|[吗呢么嘛]$|[吗呢][~～。!！]*$|^(?:怎么|怎样|为什么|为啥|什么|哪|多少|几|是否|有没有|要不要|会不会|是不是|能不能)|对吧$|好不好$|行不行$"
)
EN_QUESTION = re.compile(
    r"\?$|^(?:how|what|why|which|who|where|when|is it|is that|"
    r"are there|is there|should i|do you|does|did|can i|"
    r"any (?:tips|ideas|suggestions)|would it)\b",
    re.I,
)
ZH_SMALLTALK = re.compile(
    r"^(?:在吗|你好|您好|嗨|哈+|嗯+|好+的?|行吧?|可以|谢谢|感谢|多谢|拜拜|再见|晚安|不用了|没事|好吧|收到|明白|了解|知道了|"
    r"不错|太好了|原来如此|对|是的|没错|好消息)[!！。~～]*$"
)
EN_SMALLTALK = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ty|ok|okay|cool|great|nice|perfect|good|done|sure|bye|good night|"
    r"have a good (?:night|day)|yes|yeah|yep|no|nope|got it|sounds good|lol|haha|whoa|wow|oh|ah|"
    r"that's it|nice one)[.!]*$",
    re.I,
)
# A standing instruction survives the request filter: it is meant to hold beyond this conversation.
# "每次 … 都": the gap may not contain its own opener, so each opener scans only up to the next one; with
# `.*` every "要是" of a long line rescanned the rest of it (quadratic: 32,000 chars took ~0.5 s). Only
# ever used as a yes/no test, where the two agree (the nearest opener before the closer matches).
ZH_STANDING = re.compile(
    r"以后|今后|从今以后|从现在起|从现在开始|往后|默认|一律|每次(?:(?!每次).)*都|总是|永远|一直都|"
    r"如果(?:(?!如果).)*提醒|要是(?:(?!要是).)*提醒|每当"
)
EN_STANDING = re.compile(
    r"\bfrom now on\b|\bgoing forward\b|\bin future\b|"
    r"\bin the future\b|\bfor future\b|\balways\b|\bwhenever\b|"
    r"\bevery time\b|\bby default\b|\bif it \w+s?, remind\b|\bif .{1,40}remind me\b|"
    r"\bnever (?:use|call|send|give|suggest|list|recommend|add|write|cc)\b",
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
    r"^(?:嗯+|哦+|噢|啊|哈+|好的?|行|对了|另外|还有|其实|顺便说一下|顺便|先说一下|先说|[跟和]你说一下|[跟和]你说|告诉你|"
    r"说一下|补充一下|然后|所以|不过|"
    r"但是|那|就是|反正|总之|话说|对|是的|没错|不是)[，,。！!：:\s]*"
)
EN_DISCOURSE = re.compile(
    r"^(?:ok|okay|oh|ah|so|also|and|but|actually|well|yeah|yes|yep|no|nope|btw|anyway|right|hmm|great|good|"
    r"nice|thx|thanks|oh nice|haha|lol|ugh|not me|two things|one more thing|quick thing|first)[,.!:;—\-]*\s+",
    re.I,
)

# Trailing asides that carry nothing ("…, by the way", "…顺便说一句").
# The separator run is entered at its start only (the look-behind): retried from each of its positions, a
# long run of spaces or commas backtracked for minutes. Same matches, linear.
EN_DISCOURSE_TAIL = re.compile(r"(?<![,\s])[,\s]+(?:by the way|btw|fyi|just so you know|if that matters)\s*$", re.I)
ZH_DISCOURSE_TAIL = re.compile(r"(?:(?<![，,\s])[，,\s]+)?(?:顺便说一句|顺便一提|跟你说一下)\s*$")

# One-off plans and wishes: transient unless the clause also names a stable attribute.
ZH_PLAN = re.compile(r"^(?:想|打算|准备|计划|要不)")
EN_PLAN = re.compile(r"^(?:i'm going to|i'm planning|planning to|i want to|i'd like to|gonna)\b", re.I)
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
