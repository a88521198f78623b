var searchData=
[
  ['turbojpeg_0',['TurboJPEG',['../group___turbo_j_p_e_g.html',1,'']]]
];
