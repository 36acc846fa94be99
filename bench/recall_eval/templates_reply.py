"""Hand-written tables for the reply part of the recall evaluation set (`reply.py`): exchanges in
which the question's words are in one turn and the answer is in the reply to it.

Each topic is told in one of two ways:
- **asked** (the answer one turn later): the partner asks about it in the question's words
  ("Did the mechanic ever figure out what was wrong with your car?") and the speaker answers
  without them ("The alternator was dead. Cost me a fortune.");
- **announced** (two turns later): the speaker announces it in the question's words ("Someone
  stole my bike last night!"), the partner prompts ("No! Where?") and the speaker answers.

`answer` phrasings share no content word with the topic's `asks` (checked by `reply.py` for every
question it writes), so the turn that matches the question best is never the answer. `decoy`
phrasings use the topic's words elsewhere in the conversation and answer nothing. Slots: `{S}` the
speaker the question is about, `{P}` the partner, `{value}` (and `{value_cap}`) the answer drawn
from `values` without replacement within a conversation.
"""

REPLY_SPEAKERS = [
    "Anouk",
    "Bastian",
    "Carmen",
    "Dmitri",
    "Esther",
    "Felix",
    "Greta",
    "Hugo",
    "Imani",
    "Jakob",
    "Kirsten",
    "Lorenzo",
]

PROMPTS = [
    "Wait, what? How come?",
    "No way. What happened?",
    "Oh no! Tell me everything.",
    "Seriously? Go on.",
    "Whoa. And?",
    "Really? Since when?",
]

REPLY_TOPICS = {
    "quit_job": {
        "values": [
            "my manager kept taking credit for everything I did",
            "the commute was two hours each way",
            "they cut everyone's pay by a fifth",
            "the night shifts were wrecking my sleep",
            "they wanted me to relocate to the Hamburg office",
            "I was bored out of my mind writing the same reports",
        ],
        "announce": ["I quit my job last week, {P}!", "Big news: I quit my job. Friday was my last day there."],
        "ask": ["{S}, is it true you quit your job?", "So why did you quit your job in the end, {S}?"],
        "answer": ["Honestly? {value_cap}. I'd had enough.", "{value_cap}. Something had to give."],
        "asks": ["Why did {S} quit the job?", "What made {S} quit that job?"],
        "decoy": [
            "My cousin quit her job too. Must be something in the air.",
            "Half of my team wants to quit their jobs this year, apparently.",
        ],
    },
    "car_fault": {
        "values": [
            "the alternator was dead",
            "a cracked radiator hose",
            "the timing belt snapped",
            "the clutch had worn right through",
            "a leaking fuel pump",
            "the starter motor gave up",
        ],
        "announce": ["My car broke down on the motorway again, {P}.", "The car is in the garage, something went wrong again."],
        "ask": [
            "Did the mechanic ever figure out what was wrong with your car?",
            "What was wrong with your car in the end, {S}?",
        ],
        "answer": ["{value_cap}. Cost me a fortune.", "Turns out {value}. Four hundred euros, can you believe it."],
        "asks": ["What was wrong with {S}'s car?", "What was the problem with the car of {S}?"],
        "decoy": [
            "Something is wrong with the car park barrier at the station, it never opens.",
            "My neighbour's car alarm went off four times last night.",
        ],
    },
    "moving_out": {
        "values": [
            "the landlord is selling the building",
            "the neighbours upstairs stomp around until three in the morning",
            "the rent is going up by two hundred a month",
            "there's black mould in the bathroom that keeps coming back",
            "we need a bigger place now that the baby is coming",
            "the heating has been broken since November",
        ],
        "announce": ["We're moving out of the flat next month.", "Guess what, {P}: we're moving out of our flat."],
        "ask": ["Why are you moving out of your flat, {S}?", "How come you're moving out of the flat?"],
        "answer": ["Because {value}.", "{value_cap}. We just can't stay."],
        "asks": ["Why is {S} moving out of the flat?", "What is the reason {S} is moving out of the flat?"],
        "decoy": [
            "My sister is moving out of her flat too, everyone is on the move.",
            "Moving is the worst. I still have boxes from the last flat.",
        ],
    },
    "doctor_back": {
        "values": [
            "a slipped disc",
            "a pulled muscle from lifting boxes",
            "a trapped nerve near the hip",
            "mild scoliosis",
            "inflamed joints, probably from running",
            "a bruised rib from that fall on the ice",
        ],
        "announce": ["I finally went to the doctor about my back.", "Saw the doctor about my back pain this morning, {P}."],
        "ask": ["What did the doctor say about your back?", "Did the doctor find out what's going on with your back?"],
        "answer": ["{value_cap}. Physio twice a week for a month.", "Apparently {value}. Lots of stretching now."],
        "asks": ["What did the doctor say about {S}'s back?", "What did the doctor find when {S} went in about the back?"],
        "decoy": [
            "My doctor is on holiday again, of course.",
            "Sitting at a desk all day is terrible for your back, they say.",
        ],
    },
    "mum_birthday": {
        "values": [
            "a pottery class for two",
            "a framed map of the village she grew up in",
            "tickets to the opera",
            "a cashmere scarf",
            "a weekend at a spa in the mountains",
            "a cookbook signed by her favourite chef",
        ],
        "announce": [
            "I finally sorted out a present for my mum's birthday.",
            "Mum's birthday was on Sunday, {P}. I got her something good this year.",
        ],
        "ask": [
            "What did you end up getting your mum for her birthday?",
            "Did you find a birthday present for your mum in the end?",
        ],
        "answer": ["{value_cap}. She cried a little.", "{value_cap}! She loved it."],
        "asks": ["What did {S} get for mum's birthday?", "Which birthday present did {S} give to mum?"],
        "decoy": [
            "It's my boss's birthday on Friday and nobody has bought a present.",
            "My mum keeps asking what I want for my birthday. No idea.",
        ],
    },
    "summer_holiday": {
        "values": [
            "Crete",
            "the Azores",
            "Lake Bled in Slovenia",
            "the Faroe Islands",
            "a little town on the Amalfi coast",
            "Hokkaido",
        ],
        "announce": ["We finally booked our summer holiday!", "Summer holiday is booked, {P}. Finally."],
        "ask": ["Where are you going for the summer holiday?", "Have you decided where to go on holiday this summer?"],
        "answer": ["{value_cap}! Ten days, flying out in August.", "{value_cap}. I've wanted to go there forever."],
        "asks": ["Where is {S} going on the summer holiday?", "Which place did {S} pick for the summer holiday?"],
        "decoy": [
            "Summer holidays with kids are exhausting, my brother says.",
            "I need a holiday just to recover from this week.",
        ],
    },
    "sibling_fight": {
        "values": [
            "who should host Christmas this year",
            "money borrowed two years ago and never paid back",
            "our dad's care home",
            "selling grandma's cottage",
            "a comment about my wife at the wedding",
            "who gets to keep the family dog",
        ],
        "announce": ["I had a huge fight with my brother yesterday.", "My brother and I had a massive fight on Sunday, {P}."],
        "ask": ["What was the fight with your brother about?", "Why did you and your brother fight, {S}?"],
        "answer": ["{value_cap}. Of all things.", "About {value}. It got ugly."],
        "asks": ["What was the fight between {S} and the brother about?", "Why did {S} fight with the brother?"],
        "decoy": [
            "My kids fight all day long, I don't know how we survive.",
            "My brother finally got a haircut. Big day.",
        ],
    },
    "wallet_lost": {
        "values": [
            "at the bakery on the corner, somebody handed it in",
            "under the seat of the number 12 bus",
            "in the pocket of my other coat the whole time",
            "at the lost property office of the train station",
            "in the dog's bed, chewed at one corner",
            "behind the sofa cushions",
        ],
        "announce": ["I lost my wallet on Saturday!", "Lost my wallet again, {P}. Cards, everything."],
        "ask": ["Did you ever find your lost wallet?", "So where was your wallet in the end, {S}?"],
        "answer": ["Yes! It was {value}.", "It turned up {value}."],
        "asks": ["Where was {S}'s lost wallet found?", "Where did {S} find the wallet?"],
        "decoy": [
            "Someone on the tram lost a wallet and the whole carriage went looking.",
            "I found a wallet on the pavement once and took it to the police.",
        ],
    },
    "exam_grade": {
        "values": [
            "ninety-one out of a hundred",
            "seventy-eight, just about",
            "a B-plus",
            "the top mark in the class",
            "a narrow pass, fifty-two",
            "eighty-six",
        ],
        "announce": ["The results for the chemistry exam came out today.", "Chemistry exam results are in, {P}!"],
        "ask": ["Did you get your results for the chemistry exam?", "How did you score on the chemistry exam, {S}?"],
        "answer": ["{value_cap}. Better than I expected.", "I got {value}. I'm so relieved."],
        "asks": ["What score did {S} get on the chemistry exam?", "How did {S} do in the chemistry exam?"],
        "decoy": [
            "My nephew has his chemistry exam next week and he's panicking.",
            "Exams are so much pressure. I still dream about them.",
        ],
    },
    "bike_stolen": {
        "values": [
            "right outside the library",
            "from the rack at the train station",
            "out of our locked shed, they cut the padlock",
            "in front of the gym",
            "from the courtyard behind our building",
            "outside the cinema, in broad daylight",
        ],
        "announce": ["Someone stole my bike last night!", "My bike got stolen, {P}. I'm furious."],
        "ask": ["Where was your bike stolen from?", "Where did they steal your bike, {S}?"],
        "answer": ["{value_cap}. I'd only left it for ten minutes.", "{value_cap}. Can you believe it?"],
        "asks": ["Where was {S}'s bike stolen?", "From where did somebody steal the bike of {S}?"],
        "decoy": [
            "Bike thieves are everywhere these days, the police don't care.",
            "I'm thinking of buying an old bike for the summer.",
        ],
    },
    "promotion_result": {
        "values": [
            "they gave the role to someone from the Leeds office",
            "I got it, I'm team lead from March",
            "they put the whole thing on hold until next year",
            "they offered it, but only if I move to nights",
            "I didn't get it, they said I need more experience",
            "they created a new position just for me",
        ],
        "announce": ["I had the interview for the promotion today.", "Promotion interview done, {P}. Nervous wreck."],
        "ask": ["How did the interview for the promotion go?", "Any news about the promotion, {S}?"],
        "answer": ["Well, {value}.", "{value_cap}. Still processing it."],
        "asks": ["How did {S}'s promotion interview turn out?", "What happened with the promotion {S} interviewed for?"],
        "decoy": [
            "My friend got a promotion and now she never has time for us.",
            "Interviews make me so nervous, my hands always shake.",
        ],
    },
    "trip_cancelled": {
        "values": [
            "my passport expired and the renewal takes six weeks",
            "the dog got sick and needed surgery",
            "the airline went bust two days before",
            "a storm closed the only road there",
            "my grandfather fell and broke his hip",
            "work wouldn't let me take the days off",
        ],
        "announce": ["I had to cancel the trip to the coast.", "The coast trip is cancelled, {P}. Sorry."],
        "ask": ["Why did you cancel the trip to the coast?", "What happened with the coast trip, {S}?"],
        "answer": ["{value_cap}. Terrible timing.", "Oh, {value}. Next year maybe."],
        "asks": ["Why did {S} cancel the trip to the coast?", "What was the reason {S} called off the coast trip?"],
        "decoy": [
            "The coast is beautiful in autumn, nobody is there.",
            "My parents cancelled their trip too, they always do.",
        ],
    },
    "spare_room_guest": {
        "values": [
            "my cousin Teodor from Brno",
            "an exchange student from Chile",
            "my old flatmate, she's between places",
            "my father-in-law while his kitchen is being redone",
            "my niece, she's doing an internship in town",
            "a colleague whose flat flooded",
        ],
        "announce": ["Someone is staying in our spare room for a while.", "We have a guest in the spare room now, {P}."],
        "ask": ["Who's that staying in your spare room?", "Who is in your spare room at the moment, {S}?"],
        "answer": ["{value_cap}. Just for a few weeks.", "That's {value}. Staying till the end of the month."],
        "asks": ["Who is staying in {S}'s spare room?", "Who is the guest in the spare room of {S}?"],
        "decoy": [
            "We should turn the spare room into an office one day.",
            "Guests are lovely for three days and then they're not.",
        ],
    },
    "concert_band": {
        "values": [
            "an old punk group from the eighties",
            "a string quartet playing film music",
            "a jazz trio from New Orleans",
            "a Malian desert blues group",
            "a choir of two hundred people",
            "some Icelandic folk singer I'd never heard of",
        ],
        "announce": ["I went to a concert last night, {P}. Still buzzing.", "Best concert of my life on Friday!"],
        "ask": ["Who did you see at the concert on Friday?", "Which band played at that concert you went to, {S}?"],
        "answer": ["{value_cap}. Absolutely unreal.", "{value_cap}! I danced the whole time."],
        "asks": ["Who played at the concert {S} went to?", "Which band did {S} see at the concert?"],
        "decoy": [
            "Concert tickets are so expensive now, it's ridiculous.",
            "The band next door practises every Thursday, loudly.",
        ],
    },
    "garden_problem": {
        "values": [
            "snails, hundreds of them",
            "a fox that digs up everything",
            "the neighbour's cat using the beds as a toilet",
            "some kind of fungus on the roots",
            "way too much shade from the new building",
            "the clay soil, nothing drains",
        ],
        "announce": ["All my vegetables in the garden died again.", "The garden is a disaster this year, {P}, everything died."],
        "ask": ["Why do your garden vegetables keep dying?", "What's killing the vegetables in your garden, {S}?"],
        "answer": ["{value_cap}. I've tried everything.", "It's {value}. I'm losing the battle."],
        "asks": ["What is killing the vegetables in {S}'s garden?", "Why do the garden vegetables of {S} keep dying?"],
        "decoy": [
            "The community garden has a waiting list of three years.",
            "My grandmother grew all her own vegetables, I don't know how.",
        ],
    },
    "new_phone": {
        "values": [
            "I dropped it in the canal",
            "the screen cracked when it fell off the bunk bed",
            "the battery swelled up and popped the back off",
            "my toddler put it in the washing machine",
            "it got stolen at the festival",
            "it just stopped charging after six years",
        ],
        "announce": ["I had to buy a new phone this week.", "New phone, {P}! Not by choice though."],
        "ask": ["Why did you need a new phone?", "What happened to your old phone, {S}?"],
        "answer": ["{value_cap}. Classic me.", "Well, {value}."],
        "asks": ["Why did {S} need a new phone?", "What happened to the old phone of {S}?"],
        "decoy": [
            "Phones are so expensive now, I keep mine for years.",
            "My dad finally got a new phone and calls me about it daily.",
        ],
    },
}
