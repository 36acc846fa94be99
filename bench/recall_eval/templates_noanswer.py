"""Hand-written tables for the no-answer part of the recall evaluation set: questions that are
plausible for a conversation but that no turn of it answers (docs/recall-eval.md).

They sit beside `templates.py` rather than in it so that the tables of the answerable set, whose
output is frozen, stay exactly as they were. {S} is the speaker a question is about, {P} the
partner, {value} a value drawn for the question.

Every question comes with `terms`: words an answering turn would have to contain (the values its
answer is drawn from, and the words that name the topic). A term matches a whole word, ignoring
case and allowing a plural or verb ending (`boat` matches "boats", "boating"); a term ending in `*`
matches any word it begins (`fundrais*`). The generator keeps a question only if no turn in its
scope contains a term (`dataset.noanswer_violations`), so these lists decide what "not in memory"
means: they are written generously, and a question whose terms over-match is simply not chosen.
"""

from bench.recall_eval import templates as T

# --------------------------------------------------------------------------------------------
# (a) absent topics: nobody in the conversation talks about them. Scope: every turn.

# Topics no template of the answerable set writes about.
ABSENT_TOPICS = {
    "board_game": {
        "asks": ["Which board game does {S} always win at?", "What game does {S} play at game nights with friends?"],
        "terms": ["board game", "game night", "chess", "Monopoly", "Scrabble", "Catan", "Cluedo", "backgammon", "poker"],
    },
    "boat": {
        "asks": ["What kind of boat does {S} sail?", "What is the name of {S}'s sailing boat?"],
        "terms": ["boat", "sail", "sailing", "yacht", "kayak", "canoe", "marina", "harbour"],
    },
    "ski": {
        "asks": ["Which ski resort does {S} go to every winter?", "Where did {S} go snowboarding?"],
        "terms": ["ski", "skiing", "snowboard", "slope", "resort", "chalet", "Alps"],
    },
    "cocktail": {
        "asks": ["What is {S}'s favourite cocktail?", "What does {S} usually order at the bar?"],
        "terms": ["cocktail", "mojito", "negroni", "margarita", "martini", "spritz", "gin", "rum", "whisky", "vodka", "bar"],
    },
    "video_game": {
        "asks": ["Which video game is {S} hooked on?", "What does {S} play on the games console?"],
        "terms": ["video game", "console", "PlayStation", "Xbox", "Nintendo", "gaming", "gamer"],
    },
    "star_sign": {
        "asks": ["What is {S}'s star sign?", "Which zodiac sign was {S} born under?"],
        "terms": [
            "star sign",
            "zodiac",
            "horoscope",
            "Aries",
            "Taurus",
            "Gemini",
            "Leo",
            "Virgo",
            "Libra",
            "Scorpio",
            "Sagittarius",
            "Capricorn",
            "Aquarius",
            "Pisces",
        ],
    },
    "camera": {
        "asks": ["Which camera does {S} take photos with?", "What camera did {S} buy for photography?"],
        "terms": ["camera", "Canon", "Nikon", "Leica", "Fujifilm", "lens", "photograph*"],
    },
    "musical": {
        "asks": ["Which musical did {S} see at the theatre?", "What show did {S} watch on stage?"],
        "terms": ["musical", "theatre", "West End", "Broadway", "stage"],
    },
    "middle_name": {
        "asks": ["What is {S}'s middle name?", "Who was {S} named after?"],
        "terms": ["middle name", "named after"],
    },
    "ice_cream": {
        "asks": ["What is {S}'s favourite ice cream flavour?", "Which flavour of gelato does {S} always pick?"],
        "terms": ["ice cream", "gelato", "flavour", "sorbet", "scoop"],
    },
    "wine": {
        "asks": ["Which wine does {S} like best?", "What wine region is {S} a fan of?"],
        "terms": ["wine", "vineyard", "Rioja", "Bordeaux", "Champagne", "Chianti", "Malbec"],
    },
    "vote": {
        "asks": ["Which party did {S} vote for?", "Who did {S} back in the election?"],
        "terms": ["vote", "voting", "election", "ballot", "Labour", "Conservative", "Liberal", "campaign"],
    },
}

# --------------------------------------------------------------------------------------------
# Topics of the answerable set, by the topic names its questions carry. `key` lists the values an
# answer would name (the pool the generator draws the answer from); `hooks` the words the topic's
# turns use. As an absent topic (nobody has it) the scope is every turn and the terms are key +
# hooks; asked about the speaker who does not have it while the partner does (b), the scope is the
# speaker's own turns and the turns that name the speaker, and the terms are the key alone (the
# partner's fact and the decoys share the topic's words on purpose).

SINGLE_KEYS = {
    "pet": {
        "asks": ["What is the name of the pet {S} adopted?", "What did {S} call the animal from the rescue centre?"],
        "key": T.PET_NAMES,
        "hooks": ["adopt", "adoption", "rescue", "shelter"],
    },
    "instrument": {
        "asks": ["Which instrument is {S} learning to play?", "What instrument does {S} practise every evening?"],
        "key": T.INSTRUMENTS,
        "hooks": ["instrument", "practise", "practising"],
    },
    "allergy": {
        "asks": ["What food is {S} allergic to?", "Which allergy does {S} have to watch out for?"],
        "key": T.ALLERGENS,
        "hooks": ["allergic", "allergy", "allergies", "EpiPen"],
    },
    "vehicle": {
        "asks": ["What car does {S} drive now?", "What vehicle did {S} buy?"],
        "key": ["Volvo", "Fiat", "Vespa", "Toyota", "Mini", "camper van", "Honda", "motorbike", "cargo bike"],
        "hooks": ["car", "drive", "driving"],
    },
    "team_sport": {
        "asks": ["Which team sport does {S} play?", "What sport does {S}'s team compete in?"],
        "key": T.TEAM_SPORTS,
        "hooks": ["team", "match", "league"],
    },
    "language": {
        "asks": ["Which language is {S} learning?", "What language does {S} take lessons in?"],
        "key": T.LANGUAGES,
        "hooks": ["language", "tutor", "vocabulary", "Spanish"],
    },
    "band": {
        "asks": ["Which band did {S} see in concert?", "What group is {S} a big fan of?"],
        "key": T.BANDS,
        "hooks": ["band", "concert", "gig", "encore"],
    },
    "collection": {
        "asks": ["What does {S} collect?", "What is in {S}'s collection?"],
        "key": T.COLLECTIONS,
        "hooks": ["collect*", "flea market"],
    },
    "fear": {
        "asks": ["What is {S} afraid of?", "What phobia does {S} have?"],
        "key": T.FEARS,
        "hooks": ["terrified", "phobia", "scared", "afraid"],
    },
    "garden": {
        "asks": ["What is {S} growing in the garden?", "Which plants did {S} plant this year?"],
        "key": T.PLANTS,
        "hooks": ["planted", "garden", "balcony"],
    },
    "volunteer": {
        "asks": ["Where does {S} volunteer?", "Which charity does {S} give time to?"],
        "key": T.VOLUNTEER_PLACES,
        "hooks": ["volunteer", "volunteering", "charity"],
    },
    "degree": {
        "asks": ["What is {S} studying for a master's degree?", "Which subject is {S} taking evening classes in?"],
        "key": T.FIELDS,
        "hooks": ["master's", "degree", "coursework", "university"],
    },
    "dish": {
        "asks": ["Which dish has {S} learned to cook?", "What does {S} cook for a crowd?"],
        "key": T.DISHES,
        "hooks": ["recipe", "cooked", "cooking"],
    },
    "book": {
        "asks": ["What is {S}'s favourite novel?", "Which book could {S} not put down?"],
        "key": T.BOOKS,
        "hooks": ["novel", "book", "reread*"],
    },
    "kid": {
        "asks": ["How old is {S}'s child turning?", "What is the name of {S}'s son or daughter?"],
        "key": [name for name, _ in T.KIDS],
        "hooks": ["son", "daughter", "birthday"],
    },
    "hometown": {
        "asks": ["Where did {S} grow up?", "Which town is {S} from?"],
        "key": T.TOWNS,
        "hooks": ["grew up", "childhood", "hometown"],
    },
    "exercise": {
        "asks": ["What does {S} do every morning to keep fit?", "Which exercise does {S} do before work?"],
        "key": ["swim*", "cycle", "cycling", "yoga", "run five", "rowing", "row on", "skip rope"],
        "hooks": ["before work", "every morning", "workout"],
    },
}

# Events and corrections asked about the speaker who does not have them (b). The terms are the
# words any turn telling the event would use.
EVENT_KEYS = {
    "half_marathon": {"asks": ["When did {S} run a half marathon?"], "terms": ["half marathon", "half-marathon"]},
    "pottery": {"asks": ["When did {S} go to a pottery workshop?"], "terms": ["pottery", "ceramic*"]},
    "grandma": {"asks": ["When did {S} drive up to visit grandma?"], "terms": ["grandma", "grandmother", "gran", "granny"]},
    "interview": {"asks": ["When did {S} have a job interview?"], "terms": ["interview"]},
    "teeth": {"asks": ["When did {S} have wisdom teeth taken out?"], "terms": ["teeth", "tooth", "dentist", "dental"]},
    "driving_test": {"asks": ["When did {S} pass the driving test?"], "terms": ["driving test", "driving licence", "license"]},
    "lost_phone": {"asks": ["When did {S} leave a phone in a taxi?"], "terms": ["phone", "taxi"]},
    "surprise_party": {"asks": ["When did {S} throw a surprise party?"], "terms": ["surprise party", "surprise"]},
    "engaged": {"asks": ["When did {S} get engaged?"], "terms": ["engaged", "proposed", "propose", "marry"]},
    "tattoo": {"asks": ["When did {S} get a tattoo?"], "terms": ["tattoo"]},
    "wedding_city": {"asks": ["Which city is {S}'s wedding in?"], "terms": ["wedding", "vineyard", "married"]},
    "home_city": {"asks": ["Which city is {S} moving to?"], "terms": ["moving to", "renting a room", "relocat*"]},
    "rent": {"asks": ["How much rent does {S} pay each month?"], "terms": ["rent", "landlord"]},
    "diet": {"asks": ["Is {S} vegetarian or vegan these days?"], "terms": ["vegetarian", "vegan", "meat"]},
    "deadline": {"asks": ["When is the deadline for {S}'s renovation project?"], "terms": ["deadline", "renovation"]},
    "job_change": {"asks": ["What new job did {S} start after quitting?"], "terms": ["notice", "new job", "quit"]},
    "workout_time": {"asks": ["At what time of day does {S} go to the gym?"], "terms": ["gym", "workout", "training"]},
    "vet": {
        "asks": ["What did the vet find wrong with {S}'s pet?"],
        "terms": ["vet", *[cause for _, cause in T.VET_ISSUES]],
    },
    "cousin_job": {"asks": ["What job did {S}'s cousin get after moving?"], "terms": ["cousin", *T.SIB_JOBS]},
    "colleague_dish": {
        "asks": ["What did {S}'s new colleague bring to the office party?"],
        "terms": ["colleague", "office party", *T.DISHES],
    },
}

# --------------------------------------------------------------------------------------------
# (b) another value: the topic is the speaker's, but the question names a value ({value}, drawn
# from `pool`) that nobody in the conversation ever says. Scope: every turn; the term is the value.

OTHER_VALUE = {
    "cousin_job": {"asks": ["What job did {S}'s cousin in {value} get?"], "pool": T.CITIES},
    "friend_bridge": {"asks": ["What does the person {S} met at the {value} do for a living?"], "pool": T.MEETING_PLACES},
    "colleague_dish": {"asks": ["What did {S}'s colleague from {value} bring to the office party?"], "pool": T.COUNTRIES},
    "gift": {
        "asks": ["What present did {S} buy for the child who loves {value}?"],
        "pool": [obsession for obsession, _ in T.OBSESSIONS],
    },
    "vet": {"asks": ["What did the vet find wrong with {S}'s pet {value}?"], "pool": T.PET_NAMES},
    "interview": {"asks": ["When did {S} have the job interview at {value}?"], "pool": T.COMPANIES},
    "grandma": {"asks": ["When did {S} visit grandma in {value}?"], "pool": T.CITIES},
    "surprise_party": {"asks": ["When did {S} throw a surprise party for {value}?"], "pool": T.OTHERS},
    "trips": {"asks": ["When did {S} travel to {value}?"], "pool": T.CITIES},
    "book_rec": {"asks": ["What did {S} think of '{value}', the book {P} recommended?"], "pool": T.BOOKS},
    "home_city": {"asks": ["When is {S} moving to {value}?"], "pool": T.CITIES},
    "kid": {"asks": ["How old is {S}'s child {value} turning?"], "pool": [name for name, _ in T.KIDS]},
}

# --------------------------------------------------------------------------------------------
# (c) near misses: a small-talk or decoy turn of the conversation (the one containing `source`)
# shares the question's words but does not give the detail asked. Scope: every turn; the terms
# (`anchors`) are the words any turn about that thing would use, and the only turns allowed to
# contain them are the source turns themselves, which by construction do not answer.

NEAR_MISSES = {
    "octopus_documentary": {
        "source": "documentary about octopuses",
        "anchors": ["documentary", "octopus*"],
        "asks": ["What was the octopus documentary {S} watched called?"],
    },
    "history_podcast": {
        "source": "new podcast about history",
        "anchors": ["podcast"],
        "asks": ["What is the name of the history podcast {S} started?"],
    },
    "cinnamon_cafe": {
        "source": "makes the best cinnamon buns",
        "anchors": ["cafe", "café", "cinnamon"],
        "asks": ["What is the name of the cafe near {S} with the cinnamon buns?"],
    },
    "puzzle": {
        "source": "puzzle with 2,000 pieces",
        "anchors": ["puzzle"],
        "asks": ["What picture is on the 2,000-piece puzzle {S} started?"],
    },
    "quick_chat": {
        "source": "asking for a 'quick chat'",
        "anchors": ["quick chat", "chat"],
        "asks": ["What did {S}'s boss want to discuss in the late-night quick chat?"],
    },
    "parking_ticket": {
        "source": "parking ticket outside my own house",
        "anchors": ["parking", "ticket"],
        "asks": ["How much was the parking ticket {S} got?"],
    },
    "brother_in_law": {
        "source": "brother-in-law is visiting",
        "anchors": ["brother-in-law"],
        "asks": ["What is the name of {S}'s brother-in-law?"],
    },
    "collapsed_cake": {
        "source": "where the cake collapsed",
        "anchors": ["wedding"],
        "asks": ["Whose wedding did {S} go to when the cake collapsed?"],
    },
    "heating": {
        "source": "heating broke again",
        "anchors": ["heating", "radiator", "plumber", "boiler"],
        "asks": ["How much did {S} pay to get the heating fixed?"],
    },
    "cancelled_train": {
        "source": "train was cancelled",
        "anchors": ["train", "railway"],
        "asks": ["Why was {S}'s train cancelled?"],
    },
    "friends_band": {
        "source": "friend's band played at the pub",
        "anchors": ["band", "pub"],
        "asks": ["What is the name of the band {S}'s friend plays in?"],
    },
    "check_up": {
        "source": "doctor yesterday for a check-up",
        "anchors": ["doctor", "check-up", "prescri*"],
        "asks": ["What did the doctor prescribe {S} after the check-up?"],
    },
    "neighbours_dog": {
        "source": "neighbour's dog barked",
        "anchors": ["neighbour*", "bark*", "next door"],
        "asks": ["What breed is the dog next door to {S}?"],
    },
    "dead_laptop": {
        "source": "laptop died in the middle of a meeting",
        "anchors": ["laptop"],
        "asks": ["Which laptop did {S} buy to replace the one that died?"],
    },
    "twenty_euros": {
        "source": "found twenty euros",
        "anchors": ["euro*"],
        "asks": ["What did {S} spend the twenty euros from the coat pocket on?"],
    },
    "newsletter": {
        "source": "signed up for a newsletter",
        "anchors": ["newsletter"],
        "asks": ["Which newsletter did {S} sign up for?"],
    },
    "office_fish": {
        "source": "microwaved fish again",
        "anchors": ["microwav*", "fish"],
        "asks": ["Who keeps microwaving fish in {S}'s office?"],
    },
    "sister_says_hi": {
        "source": "My sister says hi",
        "anchors": ["sister"],
        "asks": ["What is the name of {S}'s sister?"],
    },
    "market_spend": {
        "source": "went to the market on Saturday",
        "anchors": ["market"],
        "asks": ["What did {S} buy at the market on Saturday?"],
    },
    "pizza": {
        "source": "went out for pizza after the game",
        "anchors": ["pizza", "pizzeria"],
        "asks": ["Which pizzeria does {S} go to after the game?"],
    },
    "aunt": {
        "source": "should call my aunt",
        "anchors": ["aunt"],
        "asks": ["Where does {S}'s aunt live?"],
    },
    "shoes": {
        "source": "I need new shoes",
        "anchors": ["shoe", "size"],
        "asks": ["What shoe size does {S} wear?"],
    },
    "work_drinks": {
        "source": "Work drinks on Friday",
        "anchors": ["drinks", "bar", "pub", "cocktail"],
        "asks": ["Which bar did {S}'s work drinks end up in?"],
    },
    "old_cinema": {
        "source": "closing the old cinema",
        "anchors": ["cinema"],
        "asks": ["Why is the old cinema near {S} closing down?"],
    },
    # decoys of the answerable set's topics
    "cousin_pet": {
        "source": "My cousin adopted a",
        "anchors": ["cousin"],
        "asks": ["What did {S}'s cousin name the pet from the rescue?"],
    },
    "receipts": {
        "source": "kept every receipt since 1990",
        "anchors": ["receipt", "shoebox*"],
        "asks": ["How many shoeboxes of receipts has {S}'s dad filled?"],
    },
    "cousin_dropout": {
        "source": "cousin dropped out of university",
        "anchors": ["cousin", "candle*"],
        "asks": ["What was {S}'s cousin studying before dropping out?"],
    },
    "balloons": {
        "source": "scared of balloons",
        "anchors": ["balloon"],
        "asks": ["What is the name of {S}'s friend who is scared of balloons?"],
    },
    "bouncy_castle": {
        "source": "The kids next door had a birthday party",
        "anchors": ["next door", "bouncy castle"],
        "asks": ["How old did the kids next door to {S} turn?"],
    },
    "estate_car": {
        "source": "drives the same estate car",
        "anchors": ["estate"],
        "asks": ["What make is the car {S}'s dad drives?"],
    },
    "charity_tournament": {
        "source": "team for the charity tournament",
        "anchors": ["tournament"],
        "asks": ["Which sport is {S}'s office team playing in the charity tournament?"],
    },
    "lunch_special": {
        "source": "does a lunch special",
        "anchors": ["lunch special", "corner"],
        "asks": ["What is on the lunch special at the new place on {S}'s corner?"],
    },
    "fundraising_run": {
        "source": "fundraising run through town",
        "anchors": ["fundrais*"],
        "asks": ["What cause was the fundraising run in {S}'s town for?"],
    },
    "hedge": {
        "source": "cut down the hedge",
        "anchors": ["hedge"],
        "asks": ["Why did {S}'s landlord cut down the hedge?"],
    },
    "concert_poster": {
        "source": "concert poster for a band",
        "anchors": ["poster"],
        "asks": ["What is the name of the band on the concert poster {S} saw?"],
    },
    "trainers": {
        "source": "bought new trainers",
        "anchors": ["trainers"],
        "asks": ["Which brand of trainers did {S} buy?"],
    },
    "book_club": {
        "source": "book club picked a thriller",
        "anchors": ["book club", "thriller"],
        "asks": ["Which thriller did {S}'s book club pick this month?"],
    },
    "nephew": {
        "source": "nephew can't have dairy",
        "anchors": ["nephew"],
        "asks": ["How old is {S}'s nephew who can't have dairy?"],
    },
    "seaside_town": {
        "source": "little seaside town once",
        "anchors": ["seaside", "sunburn*"],
        "asks": ["Which seaside town did {S} get sunburnt in?"],
    },
    "friend_guitar": {
        "source": "friend of mine is learning guitar",
        "anchors": ["guitar"],
        "asks": ["What is the name of {S}'s friend who is learning guitar?"],
    },
    "online_lecture": {
        "source": "watched a lecture online",
        "anchors": ["lecture"],
        "asks": ["What was the online lecture {S} fell asleep during about?"],
    },
    "grandparents_village": {
        "source": "grandparents' village had one shop",
        "anchors": ["village"],
        "asks": ["What was the name of {S}'s grandparents' village?"],
    },
    "book_fair": {
        "source": "bought five books at the fair",
        "anchors": ["fair"],
        "asks": ["Which books did {S} buy at the book fair?"],
    },
}
