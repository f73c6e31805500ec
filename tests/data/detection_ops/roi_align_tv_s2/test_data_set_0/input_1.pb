
BroisJ éB‚AÄ¬@éB‚AO*àAQ*AãËBâ/AÿBV¡B9fgA°T5BÇ©ñA×1I@$Ë!B?<CAò—LB¼fAƒÂoAÚBH'ŒATÍÄAü ™¿«?BQA7B¯®A]AB‘òAW¢ãA¡hØA?}eB	
,BÔˆJBˆIÓA1Ã¨B©5YBæ7ÐA-‘´A% ÛA}ÂB