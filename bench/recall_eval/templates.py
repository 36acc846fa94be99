"""Hand-written tables for the recall evaluation set: value pools, fact topics (what a speaker says,
how a partner reacts, a decoy that shares the topic's words without answering, and paraphrased
questions), and small-talk fillers.

Placeholders: {S} is the speaker the fact belongs to, {P} their partner in the conversation; the
other names are slots a topic draws from the pools. Turn texts carry no "Name:" prefix (the
generator adds it). Questions are written so they do not copy the answer turn's words: they name
the thing asked about in other terms, as a person asking later would.
"""

# --------------------------------------------------------------------------------------------
# value pools (drawn without replacement within one conversation)

SPEAKERS = [
    "Maya",
    "Jonas",
    "Priya",
    "Tomasz",
    "Aisha",
    "Liam",
    "Sofia",
    "Kenji",
    "Nadia",
    "Oscar",
    "Elena",
    "Marcus",
    "Hana",
    "Diego",
    "Freya",
    "Samuel",
    "Leila",
    "Victor",
    "Ingrid",
    "Rafael",
]
OTHERS = [
    "Lena",
    "Tomas",
    "Ruth",
    "Iris",
    "Felix",
    "Noah",
    "Clara",
    "Ada",
    "Hugo",
    "Mila",
    "Otto",
    "Zara",
    "Ben",
    "Nina",
    "Theo",
    "Lucia",
    "Ivan",
    "Greta",
    "Omar",
    "June",
    "Pablo",
    "Keira",
    "Arjun",
    "Bea",
    "Colm",
    "Dara",
    "Emil",
    "Fatima",
    "Gus",
    "Helga",
    "Ines",
    "Jasper",
    "Kofi",
    "Lotte",
    "Malik",
    "Nell",
]
PET_NAMES = [
    "Biscuit",
    "Pickle",
    "Mochi",
    "Waffles",
    "Juniper",
    "Pepper",
    "Noodle",
    "Clementine",
    "Pretzel",
    "Marble",
    "Sprout",
    "Tofu",
    "Ziggy",
    "Olive",
    "Nacho",
    "Bramble",
]
ANIMALS = [  # (animal, small word, description)
    ("dog", "pup", "a scruffy terrier mix"),
    ("dog", "puppy", "a nervous beagle"),
    ("cat", "kitten", "a grey tabby"),
    ("cat", "kitty", "a huge black Maine Coon"),
    ("rabbit", "bunny", "a lop-eared rabbit"),
    ("dog", "pup", "a three-legged greyhound"),
    ("cat", "kitten", "a ginger kitten with one white paw"),
    ("dog", "puppy", "a fluffy spaniel"),
]
JOBS = [  # (role, where)
    ("night-shift nurse", "at St. Anne's"),
    ("software tester", "at a tiny game studio"),
    ("pastry chef", "at a bakery by the station"),
    ("paralegal", "at a family law firm"),
    ("chemistry teacher", "at Westbrook High"),
    ("bus driver", "on the number 12 route"),
    ("physiotherapist", "at a sports clinic"),
    ("graphic designer", "for a packaging company"),
    ("sound engineer", "at a recording studio"),
    ("veterinary nurse", "at the animal clinic on Elm Street"),
    ("tax accountant", "at a mid-size audit firm"),
    ("librarian", "at the university library"),
    ("electrician", "for a solar panel installer"),
    ("data analyst", "at an insurance company"),
    ("florist", "in the covered market"),
    ("air traffic controller", "at the regional airport"),
]
TOWNS = [
    "Kinsale",
    "Tobermory",
    "Hallstatt",
    "Tarifa",
    "Ravello",
    "Bled",
    "Whitby",
    "Giethoorn",
    "Portree",
    "Colmar",
    "Sintra",
    "Ystad",
    "Oban",
    "Cesky Krumlov",
    "Dingle",
    "Honfleur",
]
CITIES = [
    "Lisbon",
    "Montreal",
    "Osaka",
    "Edinburgh",
    "Valencia",
    "Krakow",
    "Melbourne",
    "Vancouver",
    "Seville",
    "Copenhagen",
    "Bologna",
    "Tallinn",
    "Marseille",
    "Porto",
    "Ljubljana",
    "Dublin",
    "Bergen",
    "Antwerp",
    "Nairobi",
    "Hanoi",
    "Quebec City",
    "Reykjavik",
    "Naples",
    "Tbilisi",
]
INSTRUMENTS = [
    "cello",
    "ukulele",
    "saxophone",
    "drum kit",
    "piano",
    "violin",
    "banjo",
    "trumpet",
    "harp",
    "accordion",
    "clarinet",
    "mandolin",
]
BOOKS = [
    "The Lantern Keeper",
    "Salt and Iron",
    "A Map of Quiet Places",
    "The Orchard at Night",
    "Glass Harbour",
    "Seven Winters",
    "The Last Cartographer",
    "Paper Birds",
    "Under the Linden Tree",
    "North of Ordinary",
    "The Clockmaker's Daughter",
    "Tides of Amber",
    "Small Hours",
    "The Weight of Feathers",
]
SIB_JOBS = [
    "firefighter",
    "commercial pilot",
    "dentist",
    "marine biologist",
    "architect",
    "journalist",
    "police officer",
    "pharmacist",
    "civil engineer",
    "wedding photographer",
    "zookeeper",
    "sommelier",
]
ALLERGENS = ["peanuts", "shellfish", "strawberries", "sesame", "kiwi", "hazelnuts", "mustard", "celery"]
VEHICLES = [
    "a secondhand Volvo estate",
    "a little electric Fiat",
    "a bright yellow Vespa",
    "a 1998 Toyota pickup",
    "a racing-green Mini",
    "an old VW camper van",
    "a black Honda motorbike",
    "a cargo bike with a wooden box",
]
TEAM_SPORTS = [
    "volleyball",
    "water polo",
    "five-a-side football",
    "ultimate frisbee",
    "basketball",
    "rugby",
    "field hockey",
    "netball",
    "handball",
    "softball",
]
DISHES = [
    "pierogi",
    "jollof rice",
    "lemon risotto",
    "beef rendang",
    "shakshuka",
    "tonkotsu ramen",
    "moussaka",
    "seafood paella",
    "chicken biryani",
    "goulash",
    "pad thai",
    "lasagne",
]
VOLUNTEER_PLACES = [
    "the food bank on Mill Road",
    "a youth chess club",
    "the community garden",
    "a literacy charity",
    "the soup kitchen by the cathedral",
    "the hospice on Kings Lane",
    "a wildlife rescue centre",
    "the refugee welcome centre",
]
LANGUAGES = [
    "Japanese",
    "Portuguese",
    "Korean",
    "Italian",
    "Greek",
    "Swahili",
    "Dutch",
    "Mandarin",
    "Turkish",
    "Polish",
    "Finnish",
    "Arabic",
]
FIELDS = [
    "marine ecology",
    "urban planning",
    "data science",
    "art history",
    "psychology",
    "sustainable architecture",
    "public health",
    "astrophysics",
    "linguistics",
    "forensic science",
]
BANDS = [
    "The Midnight Ferns",
    "Copper Lanes",
    "Static Orchard",
    "Velvet Harbor",
    "Neon Tide",
    "Paper Lions",
    "The Hollow Pines",
    "Glass Animals Club",
    "Saint Juniper",
    "The Wild Radios",
]
COLLECTIONS = [
    "vintage postcards",
    "vinyl records",
    "enamel pins",
    "old film cameras",
    "fountain pens",
    "succulents",
    "board games",
    "snow globes",
    "football shirts",
    "antique maps",
]
KIDS = [
    ("Ella", "daughter"),
    ("Max", "son"),
    ("Rosa", "daughter"),
    ("Finn", "son"),
    ("Lily", "daughter"),
    ("Sami", "son"),
    ("Ava", "daughter"),
    ("Leo", "son"),
    ("Mira", "daughter"),
    ("Ezra", "son"),
    ("Pia", "daughter"),
    ("Jude", "son"),
]
SIBLINGS = [
    ("brother", "he", "Anton"),
    ("brother", "he", "Rory"),
    ("brother", "he", "Stefan"),
    ("brother", "he", "Mateo"),
    ("sister", "she", "Agnes"),
    ("sister", "she", "Paula"),
    ("sister", "she", "Saoirse"),
    ("sister", "she", "Yara"),
]
FEARS = ["heights", "deep water", "spiders", "flying", "needles", "thunderstorms", "tight spaces", "clowns"]
PLANTS = [
    "tomatoes",
    "chillies",
    "sunflowers",
    "lavender",
    "strawberries",
    "runner beans",
    "courgettes",
    "sweet peas",
    "blueberries",
]
EXERCISES = [  # (habit, short name for the answer)
    ("swim forty lengths at the lido", "swimming"),
    ("cycle twenty kilometres along the canal", "cycling"),
    ("do an hour of yoga in the living room", "yoga"),
    ("run five kilometres around the park", "running"),
    ("row on the machine in the garage", "rowing"),
    ("skip rope for half an hour", "skipping rope"),
]
COMPANIES = [
    "Brightline",
    "Northwind Labs",
    "Kestrel Foods",
    "Bluefin Media",
    "Harbor & Co",
    "Pinecone Games",
    "Atlas Logistics",
    "Meridian Health",
    "Oakridge Bank",
    "Lumen Studios",
    "Tidewater Energy",
]
FRIEND_JOBS = [  # (what the friend does, in a turn; short answer)
    ("races motorbikes professionally", "motorbike racer"),
    ("takes wildlife photos for magazines", "wildlife photographer"),
    ("flies rescue helicopters", "rescue helicopter pilot"),
    ("trains guide dogs for blind people", "guide dog trainer"),
    ("restores old wooden boats", "boat restorer"),
    ("builds violins by hand", "violin maker"),
    ("works as a stunt double in films", "stunt double"),
    ("runs a cheese shop", "cheesemonger"),
]
MEETING_PLACES = [
    "climbing gym",
    "pottery class",
    "dog park",
    "salsa night",
    "book swap",
    "hostel in Porto",
    "choir rehearsal",
    "farmers market",
    "chess tournament",
    "evening ceramics course",
]
OBSESSIONS = [  # (the thing a kid loves, the present)
    ("dinosaurs", "a giant T-rex puzzle"),
    ("space", "a telescope"),
    ("trains", "a wooden railway set"),
    ("horses", "riding lessons"),
    ("drawing", "a box of 72 coloured pencils"),
    ("football", "goalkeeper gloves"),
    ("magic tricks", "a magician's kit"),
    ("the ocean", "a snorkel set"),
]
COUNTRIES = ["Brazil", "Ghana", "Vietnam", "Norway", "Peru", "Lebanon", "Georgia", "Ethiopia", "Mexico", "Iran"]
HOBBY_PAIRS = [  # (hobby, how one speaker says it, how the other says it)
    (
        "rock climbing",
        "I finally got up that overhang at the bouldering wall, my forearms are dead.",
        "I've been going to the climbing centre twice a week, chalk all over my jeans.",
    ),
    (
        "birdwatching",
        "I spotted a kingfisher by the river at dawn, I nearly dropped my binoculars.",
        "I joined a birding group, we sat in a hide for three hours waiting for an owl.",
    ),
    (
        "chess",
        "I played in my first over-the-board tournament and lost every game, but I'm hooked.",
        "I've been solving chess puzzles on the train every morning, my rating is creeping up.",
    ),
    (
        "baking sourdough",
        "My sourdough starter is called Gerald and he's more reliable than most people.",
        "I baked my fourth loaf with the starter from my aunt, the crumb was finally open.",
    ),
    (
        "cycling",
        "I rode a hundred kilometres on Sunday, my legs are jelly.",
        "I bought clip-in pedals for the road bike and fell over at a red light, very dignified.",
    ),
    (
        "knitting",
        "I'm knitting a scarf for everyone I know this winter, whether they want one or not.",
        "I finished my first jumper with a cable pattern, one sleeve is slightly longer but who cares.",
    ),
    (
        "open-water swimming",
        "I swam in the lake at sunrise, the water was eleven degrees.",
        "I joined a group that swims in the sea all year, even in January.",
    ),
]
VET_ISSUES = [
    ("limping since the long walk on Sunday", "a sprained paw"),
    ("off food for two days", "a swallowed sock"),
    ("scratching its ears all night", "an ear infection"),
    ("sneezing non-stop", "a grass seed stuck in the nose"),
]
TRIP_LINES = [
    "Just got back from {city}. The food alone was worth the flight.",
    "I spent four days in {city} for a conference and skipped most of the talks to walk around.",
    "Off to {city} tomorrow morning, my bag is packed and I already miss my bed.",
    "Landed in {city} last night. The old town at dusk is ridiculous, like a painting.",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

# --------------------------------------------------------------------------------------------
# single facts: one turn answers the question
#
# Each topic has a hook: a word most of its phrasings carry in some form (adopt, work, play,
# allergic...). About two of three question phrasings use the hook, perhaps in another form, as a
# person asking later would; the third is a paraphrase that shares no word with the answer.

SINGLE_TOPICS = {
    "pet": {
        "slots": {"pet": PET_NAMES, "animal": ANIMALS},
        "says": [
            "We adopted {animal_desc} from the rescue centre on Saturday and called the little one {pet}. The sofa is no longer mine.",
            "Meet {pet}! {animal_desc_cap} who waited at the shelter for months. Adopting was the easiest decision I ever made.",
            "{pet} knocked a whole plant off the windowsill this morning. Adopting {animal_desc} was the best chaos I ever signed up for.",
        ],
        "react": [
            "No way, a {animal_small}! You have to send me pictures, {S}.",
            "Oh I love that. How is the first week going, any accidents on the rug?",
        ],
        "decoy": [
            "My cousin adopted a {animal} last year and it still hides under the bed all day.",
            "A {animal} in my building howls every time the lift moves. I'm losing my mind.",
        ],
        "asks": [
            "What is the name of the {animal} {S} adopted?",
            "What did {S} call the pet from the adoption?",
            "What did {S} name the new furry companion?",
        ],
        "answer": "{pet}",
    },
    "job": {
        "slots": {"job": JOBS},
        "says": [
            "Work is intense lately. Being a {job_role} {job_where} means ten hours on my feet.",
            "I've been working as a {job_role} {job_where} for almost three years and I still learn something every shift.",
            "People think being a {job_role} is boring work, but {job_where} nothing is the same two days in a row.",
        ],
        "react": [
            "Ten hours? {S}, you need to put your feet up this weekend.",
            "That sounds exhausting but kind of rewarding too.",
        ],
        "decoy": [
            "My mum keeps forwarding me job adverts, as if I asked for a career change.",
            "A guy at the gym told me his work is so boring he counts ceiling tiles.",
        ],
        "asks": ["What kind of work does {S} do?", "Where does {S} work, and in what role?", "What is {S}'s profession?"],
        "answer": "{job_role} {job_where}",
    },
    "hometown": {
        "slots": {"town": TOWNS},
        "says": [
            "I grew up in {town}, a tiny place where everyone knew your business. Best childhood ever.",
            "Going back to {town} always makes me nostalgic. I spent my whole childhood on those streets.",
            "Mum sent photos from {town}, the harbour where I spent my childhood summers looks exactly the same.",
        ],
        "react": ["That sounds like a postcard. Do you miss it?", "I'd love to visit someday, {S}."],
        "decoy": [
            "My grandparents' village had one shop and one bus a day, I loved it as a kid.",
            "I visited a little seaside town once and got sunburnt in April.",
        ],
        "asks": ["Where did {S} spend childhood?", "Which town was {S}'s childhood home?", "Where was {S} raised?"],
        "answer": "{town}",
    },
    "instrument": {
        "slots": {"instrument": INSTRUMENTS},
        "says": [
            "I signed up for {instrument} lessons! My fingers hurt but I can almost play a whole scale.",
            "Practising the {instrument} every evening drives my neighbours mad, but my playing is getting better.",
            "My teacher says my {instrument} playing has finally stopped sounding like a wounded goose.",
        ],
        "react": ["Play me something next time, {S}!", "Your neighbours will thank you in a year."],
        "decoy": [
            "A friend of mine is learning guitar and it is painful to listen to.",
            "I found my old recorder from primary school in a box, it still squeaks when you play it.",
        ],
        "asks": [
            "Which instrument is {S} learning to play?",
            "What does {S} practise playing?",
            "What instrument has {S} taken up?",
        ],
        "answer": "{instrument}",
    },
    "book": {
        "slots": {"book": BOOKS},
        "says": [
            "I stayed up until 3 a.m. finishing '{book}'. That ending wrecked me, best book I've read in years.",
            "Have you read '{book}'? I picked it up at the airport and it's now my favourite novel ever.",
            "I'm rereading '{book}' for the third time. No other book gets me like that one.",
        ],
        "react": ["Okay, adding it to my list, {S}.", "You always have the best recommendations."],
        "decoy": [
            "I bought five books at the fair and haven't opened a single one.",
            "My book club picked a thriller this month and nobody finished it.",
        ],
        "asks": [
            "Which book does {S} love most?",
            "What novel could {S} not put down?",
            "What title would {S} press on a friend who likes stories?",
        ],
        "answer": "{book}",
    },
    "sibling": {
        "slots": {"sibling": SIBLINGS, "sibjob": SIB_JOBS, "city": CITIES},
        "says": [
            "My {rel} {sib} just got promoted, {rel_he} is a senior {sibjob} over in {city} now.",
            "Talked to my {rel} {sib} for two hours last night. Being a {sibjob} in {city} is exhausting, apparently.",
        ],
        "react": ["Tell {sib} congratulations from me!", "Family calls like that are the best."],
        "decoy": [
            "My {rel} keeps sending me memes at 2 a.m., I have no idea when {rel_he} sleeps.",
            "Someone's {rel} at work brought a cake in for no reason, it was glorious.",
        ],
        "asks": [
            "What is the occupation of {S}'s {rel}?",
            "Which career did {S}'s {rel} go into?",
            "What line of work is {S}'s sibling in?",
        ],
        "answer": "{sibjob}",
    },
    "allergy": {
        "slots": {"food": ALLERGENS},
        "says": [
            "I had to send my plate back, the sauce had {food} in it and my allergy is so bad that even a trace makes me swell up.",
            "Reminder for the picnic: I'm seriously allergic to {food}, keep it all away from me unless you want to see my EpiPen in action.",
            "The waiter swore the dessert had no {food} in it. It did. I spent the night in A&E.",
        ],
        "react": ["Oh no, that's scary. Are you okay now?", "Noted, I'll check every label, {S}."],
        "decoy": [
            "My nephew can't have dairy, birthday parties are a logistical nightmare.",
            "I read that hay fever season will be worse this year, great.",
        ],
        "asks": ["What is {S} allergic to?", "What allergy does {S} have?", "Which food must {S} never eat?"],
        "answer": "{food}",
    },
    "vehicle": {
        "slots": {"vehicle": VEHICLES},
        "says": [
            "Finally traded in my rusty old car. I'm now the proud owner of {vehicle}!",
            "Took {vehicle} up the mountain roads this weekend. Best thing I ever bought, driving it is a dream.",
            "Parking {vehicle} in the city centre is a daily adventure, but I love driving the thing.",
        ],
        "react": ["Ooh, road trip soon?", "Congrats {S}! Does it have a name yet?"],
        "decoy": [
            "Traffic on the way home was a nightmare, I sat in the car for an hour.",
            "My dad still drives the same estate car he bought in 2004.",
        ],
        "asks": ["What does {S} drive these days?", "What new car does {S} have?", "What are {S}'s wheels?"],
        "answer": "{vehicle}",
    },
    "team_sport": {
        "slots": {"sport": TEAM_SPORTS},
        "says": [
            "Our {sport} team finally won a match! I scored twice and my knees are paying for it.",
            "{sport_cap} training Tuesday and Thursday, games on Sunday, my whole week revolves around the team.",
            "We lost the {sport} semi-final by one point. I'm still replaying that last minute in my head.",
        ],
        "react": ["You'll get them next season.", "Ha, I can't imagine you being competitive, {S}."],
        "decoy": [
            "Did you see the match on TV last night? What a finish.",
            "My office has a team for the charity tournament, I'm the water bottle carrier.",
        ],
        "asks": [
            "Which team sport does {S} play?",
            "What sport does {S} compete in with a team?",
            "What game does {S} play in a league?",
        ],
        "answer": "{sport}",
    },
    "dish": {
        "slots": {"dish": DISHES},
        "says": [
            "Spent all Sunday cooking {dish} for twelve people. Nobody left hungry.",
            "I finally learned to cook {dish} properly. Five attempts, but tonight it tasted exactly like home.",
            "My grandmother's {dish} recipe is officially mine, I cooked it for her on Sunday and she cried.",
        ],
        "react": ["Save me a plate next time!", "That's so lovely, {S}."],
        "decoy": [
            "I tried to cook dinner yesterday and set off the smoke alarm twice.",
            "The new place on the corner does a lunch special, it's cheap and decent.",
        ],
        "asks": [
            "What dish has {S} learned to cook well?",
            "What does {S} like cooking for people?",
            "Which meal is {S} proud of making?",
        ],
        "answer": "{dish}",
    },
    "volunteer": {
        "slots": {"place": VOLUNTEER_PLACES},
        "says": [
            "I've started volunteering at {place} every other Saturday. It puts everything in perspective.",
            "Spent the morning at {place} again. The volunteer shifts are the best part of my month.",
        ],
        "react": ["That's really good of you, {S}.", "I keep saying I'll do something like that."],
        "decoy": [
            "I finally cleaned out my closet, three bags went to the charity shop.",
            "There was a fundraising run through town on Sunday, the roads were closed all morning.",
        ],
        "asks": [
            "Where does {S} volunteer?",
            "Where does {S} do volunteer shifts?",
            "Which organisation gets {S}'s unpaid time?",
        ],
        "answer": "{place}",
    },
    "language": {
        "slots": {"lang": LANGUAGES},
        "says": [
            "Day 120 of my {lang} streak! Learning a language is slow, but I can finally order food without pointing at the menu.",
            "My {lang} tutor laughed at my pronunciation again today, but she says my language skills are improving.",
            "I dreamt in {lang} last night, my first dream in another language! Mostly numbers, but still.",
        ],
        "react": ["I'm impressed, I gave up on Spanish after a week.", "Teach me a swear word, {S}."],
        "decoy": [
            "My phone switched itself to another language and it took me an hour to fix.",
            "Someone on the train was learning vocabulary out loud, very brave.",
        ],
        "asks": [
            "Which language is {S} learning?",
            "In what language is {S} taking lessons?",
            "What foreign tongue is {S} studying?",
        ],
        "answer": "{lang}",
    },
    "degree": {
        "slots": {"field": FIELDS},
        "says": [
            "I got into a part-time master's degree in {field}! Evening classes start in autumn.",
            "My {field} coursework is brutal this term, three essays due in the same week. Studying at night is rough.",
        ],
        "react": ["Congratulations, {S}, that's massive!", "How do you find time for all of that?"],
        "decoy": [
            "My cousin dropped out of university and now sells candles online, doing great actually.",
            "I watched a lecture online last night and fell asleep halfway.",
        ],
        "asks": ["What is {S}'s degree in?", "What subject is {S} studying?", "Which academic field did {S} enrol in?"],
        "answer": "{field}",
    },
    "band": {
        "slots": {"band": BANDS},
        "says": [
            "We saw {band} live last night and I screamed myself hoarse during the encore. Best concert of my life.",
            "Got front-row tickets for the {band} concert! I've loved them since I was sixteen.",
        ],
        "react": ["Jealous! Did they play the old stuff?", "Your voice must be rough, {S}, I believe you."],
        "decoy": [
            "I saw a concert poster for a band I liked in school. Made me feel ancient.",
            "The festival line-up came out and I don't recognise a single name.",
        ],
        "asks": [
            "Which band's concert was {S} excited about?",
            "Whose concert did {S} go to?",
            "What group is {S} a huge fan of?",
        ],
        "answer": "{band}",
    },
    "collection": {
        "slots": {"items": COLLECTIONS},
        "says": [
            "Found three more {items} at the flea market. My collection has officially outgrown the shelf.",
            "I counted last night: I own over sixty {items}. Collecting them is becoming a problem.",
        ],
        "react": ["Sixty is not a problem, it's a museum.", "You need a bigger flat, {S}."],
        "decoy": [
            "My dad has kept every receipt since 1990 in shoeboxes. Every single one.",
            "I went to the flea market once and came home with a lamp I didn't need.",
        ],
        "asks": ["What does {S} collect?", "What items make up {S}'s collection?", "What objects does {S} hoard as a hobby?"],
        "answer": "{items}",
    },
    "kid": {
        "slots": {"kid": KIDS, "age": ["four", "five", "six", "seven", "eight", "nine"]},
        "says": [
            "My {childrel} {kid} turns {age} on Friday and has requested a cake shaped like a volcano.",
            "{kid} turns {age} next week! Where did the time go? My {childrel} was a baby five minutes ago.",
        ],
        "react": ["Happy birthday to {kid}!", "A volcano cake! You're a brave parent, {S}."],
        "decoy": [
            "The kids next door had a birthday party with a bouncy castle, so much screaming.",
            "My niece asked me how old I am and then said 'wow' in a worried voice.",
        ],
        "asks": ["How old is {S}'s {childrel} turning?", "What age will {S}'s child reach at the birthday?"],
        "answer": "{age}",
    },
    "fear": {
        "slots": {"fear": FEARS},
        "says": [
            "The glass walkway was a nightmare. I've been terrified of {fear} since I was a kid.",
            "I know it's irrational, but I'm terrified of {fear}. My heart races every single time.",
        ],
        "react": ["Oh no, that sounds awful, {S}.", "Everyone has something. Mine is geese."],
        "decoy": [
            "My friend is scared of balloons, she leaves every party early.",
            "Horror films don't scare me, but tax forms do.",
        ],
        "asks": ["What is {S} terrified of?", "What phobia does {S} have?", "What frightens {S} the most?"],
        "answer": "{fear}",
    },
    "garden": {
        "slots": {"plant": PLANTS},
        "says": [
            "The {plant} I planted on my balcony are finally thriving. I'll have more than I can eat.",
            "I planted {plant} in the back garden this spring and they're taller than me already.",
        ],
        "react": ["Green fingers! Mine all died.", "Save me some, {S}!"],
        "decoy": [
            "My landlord cut down the hedge without asking, the garden looks bald now.",
            "I bought a cactus and somehow overwatered it.",
        ],
        "asks": ["What has {S} planted at home?", "Which plants does {S} look after?", "What is {S} growing?"],
        "answer": "{plant}",
    },
    "exercise": {
        "slots": {"exercise": EXERCISES},
        "says": [
            "Every day before work I {exercise_habit}. It's the only way my brain switches on.",
            "New routine: every morning I {exercise_habit} at 6 a.m. Don't laugh.",
        ],
        "react": ["6 a.m.? Who are you, {S}?", "Respect. I can barely get out of bed."],
        "decoy": [
            "I bought new trainers and they gave me blisters on day one.",
            "I read that working out late at night wrecks your sleep.",
        ],
        "asks": [
            "What workout does {S} do in the mornings?",
            "What does {S} do before work to stay fit?",
            "How does {S} keep fit at the start of the day?",
        ],
        "answer": "{exercise_short}",
    },
}

# --------------------------------------------------------------------------------------------
# open questions: an opinion or summary, answered by one turn

OPEN_TOPICS = {
    "remote_work": {
        "says": [
            "Honestly, working from my kitchen table every day has worn me down. I miss the chatter and the walk to the tram.",
            "Not commuting changed my life. I get two hours back every day and I'm never going back to an office.",
        ],
        "asks": [
            "How does {S} feel about working from home?",
            "What is {S}'s view on remote work?",
            "Does {S} want to go back to an office?",
        ],
    },
    "social_media": {
        "says": [
            "I deleted every app from my phone last month. I was scrolling social media for hours and feeling worse each time.",
            "I know everyone hates social media, but the online forums got me through a really lonely year.",
        ],
        "asks": ["What does {S} think of social media?", "What is {S}'s attitude toward online platforms?"],
    },
    "city_life": {
        "says": [
            "The noise, the rent, the crowds on the underground... I'm done with city life. I dream about a cottage with a vegetable patch.",
            "I could never leave the city. I need the buzz, the late-night food, the feeling that something is always happening.",
        ],
        "asks": ["How does {S} feel about living in a big city?", "Would {S} rather live somewhere urban or rural?"],
    },
    "winter": {
        "says": [
            "Give me dark evenings, thick socks and snow on the roofs any day. The cold season is my favourite time of year.",
            "From November to March I basically hibernate. Winter skies make me miserable.",
        ],
        "asks": ["What is {S}'s attitude toward winter?", "How does {S} cope with the cold months?"],
    },
    "public_speaking": {
        "says": [
            "I presented to the whole board today and my voice didn't even shake. A year ago I'd have hidden in the bathroom.",
            "Standing up in front of people still makes me feel sick. I rehearsed that presentation forty times.",
        ],
        "asks": ["How does {S} feel about giving presentations?", "Is {S} comfortable speaking in front of an audience?"],
    },
    "camping": {
        "says": [
            "Camping? Sleeping on rocks, mosquitoes everywhere, no shower for three days... never again. I'm a hotel person.",
            "Nothing beats waking up in a tent with frost on the grass and making coffee on a tiny stove.",
        ],
        "asks": ["Does {S} enjoy camping?", "What does {S} think about sleeping outdoors on trips?"],
    },
    "boss": {
        "says": [
            "My manager finally gave me credit in front of the team. She's tough but fair, and I'm learning so much from her.",
            "My manager takes credit for everything and answers emails at midnight. I'm quietly updating my CV.",
        ],
        "asks": ["How does {S} get along with their manager?", "What does {S} think of their boss?"],
    },
    "moving_abroad": {
        "says": [
            "Part of me wants to move abroad and start over, but leaving Mum on her own scares me.",
            "I'd move to another country tomorrow if I could. Staying in one place my whole life sounds like a waste.",
        ],
        "asks": ["Is {S} tempted to move abroad?", "How does {S} feel about relocating to another country?"],
    },
    "new_flat": {
        "says": [
            "The flat is tiny and the radiator clanks all night, but the morning light makes up for all of it.",
            "I regret signing the lease on this flat. The walls are paper-thin and the landlord never answers.",
        ],
        "asks": ["How does {S} like the flat they live in now?", "What is {S}'s opinion of the current apartment?"],
    },
    "cooking": {
        "says": [
            "Cooking is my therapy. Chopping onions after a long day is the only time my brain goes quiet.",
            "Cooking is a chore, honestly. If I could live on toast forever I would.",
        ],
        "asks": ["What role does cooking play in {S}'s life?", "Does {S} enjoy making meals?"],
    },
    "painting": {
        "says": [
            "I'm not talented, but painting watercolours on Sunday mornings makes me weirdly happy. Nobody has to see them.",
            "I gave up on painting. Every picture looked worse than the one in my head and it just frustrated me.",
        ],
        "asks": ["How does {S} feel about painting?", "What does {S} get out of making art?"],
    },
    "running": {
        "says": [
            "Running used to feel like punishment. Now it's the part of the day I look forward to most.",
            "I tried to get into running again and my knees filed a formal complaint. I'll stick to walking.",
        ],
        "asks": ["How does {S} feel about running these days?", "Has {S} come to like jogging?"],
    },
    "retreat": {
        "says": [
            "The biggest thing I took away from the retreat is that I need to stop saying yes to everything.",
            "That silent weekend retreat in the mountains taught me I'm terrible at doing nothing, and that it's okay.",
        ],
        "asks": ["What did {S} learn at the retreat?", "What was {S}'s main insight from the days off?"],
    },
    "reality_tv": {
        "says": [
            "Dating shows are my guilty pleasure. I know they're scripted and I don't care one bit.",
            "I can't stand those shows where people shout at each other in villas. It's so fake.",
        ],
        "asks": ["What does {S} think about reality TV shows?", "Does {S} watch dating programmes?"],
    },
}

# advice and feedback from the partner: the partner's turn answers the open question
ADVICE_TOPICS = {
    "friend_fight": {
        "setup": "I had a falling-out with {other} and we haven't spoken in two weeks. I keep drafting messages and deleting them.",
        "advice": "If I were you, I'd call {other} instead of texting. Silence only makes these things bigger, {S}.",
        "asks": [
            "What did {P} suggest {S} do about the quarrel with {other}?",
            "How did {P} think {S} should patch things up with {other}?",
        ],
    },
    "pay_rise": {
        "setup": "I want to ask for a raise but I'm dreading the conversation with my manager.",
        "advice": "Write down three things you delivered this year with numbers, {S}. Walk in with the list and ask for a figure, not a favour.",
        "asks": ["How did {P} recommend {S} ask for more money?", "What was {P}'s tip for {S}'s salary negotiation?"],
    },
    "burnout": {
        "setup": "I'm exhausted all the time. I work, I sleep, I work again. I don't even enjoy the weekends any more.",
        "advice": "Take a proper week off, {S}, phone in a drawer. And talk to your doctor, being that tired isn't normal.",
        "asks": [
            "What did {P} tell {S} to do about being tired all the time?",
            "What was {P}'s response when {S} described burnout?",
        ],
    },
    "first_marathon": {
        "setup": "I signed up for a marathon in the autumn and I have no idea how to train for it.",
        "advice": "For a marathon, build up slowly, {S}: one long slow run a week, never more than ten percent extra, and rest days count as training too.",
        "asks": ["What marathon plan did {P} propose to {S}?", "How did {P} say {S} should prepare for 42 kilometres?"],
    },
}

# --------------------------------------------------------------------------------------------
# temporal: dated events ("when did"), and values corrected later in the conversation

EVENTS = {
    "half_marathon": {
        "says": "I ran my first half marathon {when}! Two hours and six minutes, and I cried at the finish line.",
        "asks": ["On what date did {S} do the half marathon?", "When did {S} complete a 21-kilometre race?"],
    },
    "pottery": {
        "says": "I went to a pottery workshop {when} and made the wonkiest bowl in history.",
        "asks": ["When was {S}'s pottery class?", "When did {S} try making ceramics?"],
    },
    "grandma": {
        "says": "I drove up to see my grandma in {city} {when}. She still beats me at cards.",
        "asks": ["When was {S}'s trip to see grandma?", "When did {S} visit a grandparent?"],
    },
    "interview": {
        "says": "Had an interview at {company} {when}. They grilled me for two hours straight.",
        "asks": ["When did {S} have the job interview at {company}?", "On which day was {S} questioned by {company} for a role?"],
    },
    "teeth": {
        "says": "Got my wisdom teeth pulled {when}. I look like a hamster and I'm living on soup.",
        "asks": ["When were {S}'s wisdom teeth removed?", "When did {S} have dental surgery?"],
    },
    "driving_test": {
        "says": "I passed my driving test {when}! Third time lucky.",
        "asks": ["When did {S} get a driving licence?", "When did {S} finally pass the exam to drive?"],
    },
    "lost_phone": {
        "says": "I left my phone in a taxi {when} and I've been living like it's 1995 ever since.",
        "asks": ["When did {S}'s phone go missing?", "When did {S} lose a mobile?"],
    },
    "surprise_party": {
        "says": "We threw {other} a surprise party {when}. {other} had absolutely no idea, it was perfect.",
        "asks": ["When did {S} organise a surprise celebration for {other}?", "When was {other}'s surprise party?"],
    },
    "engaged": {
        "says": "{other} proposed {when} on the pier at sunset! I said yes before the question was finished.",
        "asks": ["When did {other} ask {S} to marry?", "When did {S} get engaged?"],
    },
    "tattoo": {
        "says": "I got my first tattoo {when}, a tiny swallow on my wrist. It hurt way less than I expected.",
        "asks": ["When did {S} get the swallow tattoo?", "When did {S} get inked for the first time?"],
    },
}
WHEN = [  # (phrase in the turn, how many days before the session date or which day it names)
    ("yesterday", 1),
    ("last weekend", "weekend"),
    ("on Tuesday", "tuesday"),
    ("this morning", 0),
    ("last Friday", "friday"),
    ("two days ago", 2),
    ("last week", "week"),
]

CORRECTIONS = {
    "wedding_city": {
        "slots": {"city": CITIES, "city2": CITIES, "month": MONTHS},
        "first": "The wedding is booked! {month} in {city}, at a vineyard with a view of the hills.",
        "then": "Change of plans: the vineyard cancelled on us, so the wedding moves to {city2}. Same month, new everything else.",
        "ask_latest": ["Where will {S}'s wedding take place now?", "Which city is {S} getting married in after all?"],
        "ask_first": [
            "Where was {S}'s wedding originally supposed to be?",
            "What was the first location {S} chose for getting married?",
        ],
        "answer_latest": "{city2}",
        "answer_first": "{city}",
    },
    "job_change": {
        "slots": {"job": JOBS, "job2": JOBS, "company": COMPANIES},
        "first": "Still a {job_role} {job_where}, still underpaid, still there.",
        "then": "I handed in my notice! From Monday I'm a {job2_role} at {company}. Terrified and thrilled.",
        "ask_latest": ["What job did {S} take after handing in notice?", "What is {S}'s current position?"],
        "ask_changed": [
            "How did {S}'s job change after handing in notice?",
            "What was {S}'s line of work before, and what is it after?",
        ],
        "answer_latest": "{job2_role} at {company}",
    },
    "diet": {
        "slots": {},
        "first": "I've gone vegetarian, no meat since January, and I honestly don't miss it.",
        "then": "Next step: I'm fully vegan now. Even cheese is off the table, which hurts.",
        "ask_latest": ["What diet does {S} follow now?", "Is {S} still just vegetarian, or stricter now?"],
        "ask_first": ["What did {S} give up eating in January?", "What eating change did {S} make at the start of the year?"],
        "answer_latest": "vegan",
        "answer_first": "vegetarian",
    },
    "home_city": {
        "slots": {"city": CITIES, "city2": CITIES},
        "first": "I'm renting a room in {city} for now, just until I figure things out.",
        "then": "Big news: I'm moving to {city2} for good at the end of the month. Boxes everywhere.",
        "ask_latest": ["Where is {S} moving for good?", "Which city is {S} settling in as of the latest chat?"],
        "ask_first": ["Where was {S} renting a room before?", "Where was {S} temporarily staying before relocating?"],
        "answer_latest": "{city2}",
        "answer_first": "{city}",
    },
    "workout_time": {
        "slots": {},
        "first": "I'm training at 6 a.m. before work, the gym is empty and it's glorious.",
        "then": "I switched my workouts to the evenings. Early alarms were killing me.",
        "ask_latest": ["When does {S} do workouts these days?", "At what time of day does {S} exercise now?"],
        "ask_first": ["When did {S} originally train?", "What was {S}'s exercise schedule at first?"],
        "answer_latest": "evenings",
        "answer_first": "6 a.m. before work",
    },
    "rent": {
        "slots": {"rent": ["850", "920", "1,050", "1,200"], "rent2": ["980", "1,100", "1,250", "1,400"]},
        "first": "My rent is {rent} a month, which is already more than half my salary.",
        "then": "The landlord hiked my rent to {rent2}. I'm furious and looking at listings every night.",
        "ask_latest": ["What is {S}'s monthly rent after the increase?", "How much does {S} pay for housing each month now?"],
        "ask_first": ["What did {S}'s flat cost per month before the landlord's hike?"],
        "answer_latest": "{rent2}",
        "answer_first": "{rent}",
    },
    "deadline": {
        "slots": {"month": MONTHS, "month2": MONTHS},
        "first": "The renovation project is due at the end of {month}, no wiggle room.",
        "then": "Good news for once: the client pushed the renovation deadline back to {month2}.",
        "ask_latest": ["What is the new deadline for {S}'s renovation?", "When is {S}'s refurbishment job due now?"],
        "ask_first": ["When was {S}'s project originally due?"],
        "answer_latest": "{month2}",
        "answer_first": "{month}",
    },
    "relationship": {
        "slots": {"other": OTHERS},
        "first": "Things with {other} are going great, we're even talking about moving in together.",
        "then": "{other} and I broke up. It was mutual, but it still stings.",
        "ask_latest": ["Are {S} and {other} still a couple?", "What happened between {S} and {other} in the end?"],
        "ask_first": ["What were {S} and {other} planning early on?"],
        "answer_latest": "they broke up",
        "answer_first": "moving in together",
    },
}

# --------------------------------------------------------------------------------------------
# multi-hop: the question needs two or more turns

MULTI_HOP = {
    "friend_bridge": {
        "first": "I met a really funny person called {other} at the {meeting} last week. We talked for hours.",
        "then": "Turns out {other} {friend_does}. I had no idea until we went for dinner.",
        "asks": [
            "What does the person {S} met at the {meeting} do for a living?",
            "What is the occupation of {S}'s new acquaintance from the {meeting}?",
        ],
        "answer": "{friend_job}",
    },
    "cousin_job": {
        "first": "My cousin {other} moved to {city} in the spring and says the rain never stops.",
        "then": "{other} got a job as a {sibjob}! First real job since the move.",
        "asks": ["What job did {S}'s relative in {city} land?", "What work does {S}'s cousin who relocated to {city} do?"],
        "answer": "{sibjob}",
    },
    "trips": {
        "asks": ["Which cities has {S} travelled to during these months?", "List the places {S} visited on trips."],
    },
    "shared_hobby": {
        "asks": ["What pastime do {S} and {P} have in common?", "Which hobby do both {S} and {P} enjoy?"],
    },
    "gift": {
        "first": "{kid} is completely obsessed with {obsession} right now, it's all we talk about at dinner.",
        "then": "Ordered {gift} for {kid}'s birthday, fingers crossed it arrives in time.",
        "asks": [
            "What present did {S} buy for the child who loves {obsession}?",
            "What birthday gift did {S} pick to match the kid's passion for {obsession}?",
        ],
        "answer": "{gift}",
    },
    "book_rec": {
        "first": "You should read '{book}', {S}. I think you'd really love it.",  # said by the partner
        "then": "I finished the novel you recommended, {P}. The twist in the middle! I gasped on the bus.",
        "asks": ["Which book did {S} end up reading on {P}'s suggestion?", "What title did {P} get {S} to read?"],
        "answer": "{book}",
    },
    "vet": {
        "first": "{pet} has been {vet_symptom}, I'm worried sick.",
        "then": "Back from the vet: it was {vet_cause}. Two weeks of rest and a cone of shame.",
        "asks": ["What did the vet find when {S}'s animal {pet} was unwell?", "What turned out to be wrong with {pet}?"],
        "answer": "{vet_cause}",
    },
    "colleague_dish": {
        "first": "My new colleague {other} sits next to me, {other} moved here from {country} two years ago.",
        "then": "{other} brought homemade {dish} to the office party and it vanished in five minutes.",
        "asks": [
            "What food did {S}'s coworker from {country} bring to the celebration?",
            "Which dish did the colleague who came from {country} make for the work party?",
        ],
        "answer": "{dish}",
    },
}

# --------------------------------------------------------------------------------------------
# small talk: {X} speaks, {Y} is the other speaker; shared words (went, yesterday, work, family,
# names) make them realistic distractors

GREETINGS = [
    "Hey {Y}! Long time no talk. How have you been?",
    "Hi {Y}, sorry I went quiet, this week was chaos.",
    "Morning {Y}! Coffee in hand, ready to catch up.",
    "{Y}! I was just thinking about you. What's new?",
    "Hello hello, {Y}. Got a minute to chat?",
    "Hey you. It feels like ages since we talked, {Y}.",
]
GREETING_REPLIES = [
    "Hey {Y}! I'm good, busy but good. You?",
    "Hi! Always got time for you, {Y}.",
    "{Y}! Perfect timing, I needed a break.",
    "Oh hey, not bad at all. Lots to tell you actually.",
    "Hi {Y}! Same old, same old. What about you?",
]
GOODBYES = [
    "Let's catch up properly next week, I have to run.",
    "Talk soon, {Y}! Say hi to everyone for me.",
    "Okay, I need to get some sleep. Night, {Y}!",
    "Great talking to you, {Y}. Take care of yourself.",
    "I'd better go, dinner is burning. Speak soon!",
    "Bye for now, {Y}, this was lovely.",
]
REACTIONS = [
    "Wow, that's huge, {Y}!",
    "Haha, classic. I would have done exactly the same.",
    "Oh no, I'm sorry to hear that. Are you doing okay?",
    "That sounds amazing. How did it go?",
    "I totally get that.",
    "Wait, really? Tell me everything.",
    "I'm so proud of you, {Y}.",
    "Same here, honestly. Time flies.",
    "Thanks for asking, {Y}. It means a lot.",
    "Ha, that's so you, {Y}.",
    "Ugh, I know that feeling.",
    "Good for you! You deserve it.",
    "Hmm, I'm not sure I would have.",
    "That made me laugh out loud on the bus.",
    "You always handle these things better than me.",
]
SMALL_TALK = [
    "I went to the supermarket yesterday and forgot the one thing I needed.",
    "Work has been busy, nothing exciting to report.",
    "The weather has been so grey lately, I can't wait for summer.",
    "My weekend was quiet, mostly laundry and a long nap.",
    "I watched a documentary about octopuses last night, they're smarter than my coworkers.",
    "We had friends over for dinner on Saturday, I'm still full.",
    "I really need a holiday, even a short one.",
    "I started a puzzle with 2,000 pieces. Huge mistake.",
    "My family group chat is chaos right now, everyone is planning the holidays already.",
    "I feel like this year is going by so fast.",
    "How's your family doing, {Y}?",
    "What have you been up to lately, {Y}?",
    "Anything new with you?",
    "Oh, and how's the new place treating you?",
    "My sister says hi, by the way.",
    "I spent the whole evening reading on the sofa, it was bliss.",
    "My phone screen cracked again, third time this year.",
    "I've been sleeping badly, too much screen time I think.",
    "We should plan a trip together sometime, {Y}.",
    "Work drinks on Friday went on way too long.",
    "I went for a walk by the river yesterday, it was lovely.",
    "The new cafe near me makes the best cinnamon buns.",
    "I'm trying to drink more water. It's going badly.",
    "My boss sent an email at 11 p.m. asking for a 'quick chat' tomorrow.",
    "I went to a wedding last year where the cake collapsed during the speeches.",
    "Our heating broke again, I'm typing this in gloves.",
    "My neighbour's dog barked for hours this morning.",
    "I binge-watched a whole series this weekend. No regrets.",
    "Did you hear they're closing the old cinema?",
    "I had the weirdest dream last night, you were in it, {Y}.",
    "My mum called three times today about nothing.",
    "I got a parking ticket outside my own house. Unbelievable.",
    "I signed up for a newsletter and now I get twelve emails a day.",
    "Someone at work microwaved fish again. War has been declared.",
    "I'm so behind on messages, sorry {Y}.",
    "I went to the doctor yesterday for a check-up, all fine.",
    "The train was cancelled so I walked home in the rain.",
    "I really love this time of year.",
    "My friend got a new job and won't stop talking about it.",
    "I tried a new recipe last night, it was edible, just about.",
    "I need new shoes, mine have holes in them.",
    "I finally fixed the wobbly table. Adulthood achieved.",
    "I saw a fox in the street at midnight, it stared at me.",
    "My laptop died in the middle of a meeting today.",
    "I started a new podcast about history, it's great.",
    "Honestly, I just want a quiet week for once.",
    "I went to the market on Saturday and spent way too much.",
    "I'm thinking of repainting the living room, maybe green.",
    "I've been meaning to call you all week, {Y}.",
    "My brother-in-law is visiting next month, pray for me.",
    "The kids in the park were playing football until dark.",
    "I think I'm finally getting used to the new schedule at work.",
    "Everyone at the office has a cold this week.",
    "I found twenty euros in an old coat pocket. Best day ever.",
    "We went out for pizza after the game, tradition.",
    "I've been trying to read more and scroll less.",
    "My friend's band played at the pub on Friday, they were loud.",
    "I went to bed at nine last night like a grandma.",
    "I really should call my aunt, it's been months.",
]
PREFIXES = ["", "", "", "Oh, ", "Honestly, ", "Ha, ", "By the way, ", "Also, ", "Funny thing: ", "Okay so, "]
SUFFIXES = ["", "", "", " Anyway.", " Life, right?", " How about you?", " Classic me.", " Ugh.", " Just saying."]
